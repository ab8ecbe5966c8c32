#include "bench_serve.h"

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln::cli {

namespace {

void reply(const nlohmann::json& message) { std::cout << message.dump() << std::endl; }

// Runs the model `count` times and returns each run's wall time in milliseconds.
std::vector<double> timeRuns(Runner& runner, const NamedTensors& inputs, int count) {
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    auto start = std::chrono::steady_clock::now();
    runner.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  return ms;
}

}  // namespace

int serveBench(const std::string& model, int threads, const InputOptions& in) {
  std::unique_ptr<Runner> runner;
  NamedTensors inputs;
  reply({{"event", "started"}, {"pid", static_cast<long>(getpid())}});
  std::string line;
  try {
    while (std::getline(std::cin, line)) {
      std::istringstream words(line);
      std::string command;
      words >> command;
      if (command.empty()) continue;
      if (command == "quit") return 0;
      if (command == "load") {
        if (runner) throw Error(ErrorCode::kInvalidArgument, "'load' sent twice");
        auto start = std::chrono::steady_clock::now();
        runner = openModel(model, threads);
        const double loadMs =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        inputs = makeInputs(*runner, in);
        nlohmann::json described = nlohmann::json::array();
        for (const auto& [name, tensor] : inputs) {
          described.push_back(
              {{"name", name}, {"dtype", dataTypeName(tensor.dtype())}, {"shape", tensor.shape()}});
        }
        reply({{"event", "loaded"},
               {"model", model},
               {"threads", threads},
               {"load_ms", loadMs},
               {"inputs", described}});
      } else if (command == "run") {
        int count = 0;
        if (!(words >> count) || count < 1) {
          throw Error(ErrorCode::kInvalidArgument,
                      "bad command '" + line + "': expected 'run K' with K >= 1");
        }
        if (!runner) throw Error(ErrorCode::kInvalidArgument, "'run' before 'load'");
        reply({{"event", "ran"}, {"latencies_ms", timeRuns(*runner, inputs, count)}});
      } else {
        throw Error(ErrorCode::kInvalidArgument,
                    "unknown command '" + line + "' (expected load, run K or quit)");
      }
    }
  } catch (const std::exception& e) {
    reply({{"event", "error"}, {"message", e.what()}});
    return exitCodeFor(e);
  }
  return 0;
}

}  // namespace kiln::cli
