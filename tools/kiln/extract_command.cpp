// kiln extract MODEL.onnx --inputs T1,T2 --outputs T3 -o SUB.onnx: the smallest sub-model computing
// the outputs from the inputs (onnx/model_extract.h), as onnx.utils.extract_model.
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "onnx/model_extract.h"

namespace kiln::cli {

Action addExtractCommand(CLI::App& app) {
  struct Options {
    std::string model, output;
    std::vector<std::string> inputs, outputs;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("extract", "Cut the sub-model that computes some tensors from others");
  cmd->add_option("model", opts->model, "ONNX model file")->required();
  cmd->add_option("--inputs", opts->inputs, "T1,T2: the sub-model's inputs (tensors of the model)")
      ->delimiter(',');
  cmd->add_option("--outputs", opts->outputs, "T3,...: the sub-model's outputs")
      ->delimiter(',')
      ->required();
  cmd->add_option("-o,--output", opts->output, "SUB.onnx: where to write the sub-model")
      ->required();
  return [opts] {
    std::erase(opts->inputs,
               std::string());  // `--inputs ""`: none (outputs computed from weights alone)
    onnx_import::extractModel(opts->model, opts->inputs, opts->outputs, opts->output);
    std::cout << "wrote " << opts->output << " (" << opts->inputs.size() << " inputs, "
              << opts->outputs.size() << " outputs)\n";
    return 0;
  };
}

}  // namespace kiln::cli
