// kiln ops [--markdown]: the operators kiln implements, from the registries (docs/operators.md).
#include <iostream>

#include "backends/cpu/kernel.h"
#include "commands.h"
#include "ir/op_schema.h"

namespace kiln::cli {

namespace {

std::string opsetRange(const ir::OpSchema& s) {
  return s.maxOpset >= 1000 ? std::to_string(s.minOpset) + "+" : std::to_string(s.minOpset) + "-" + std::to_string(s.maxOpset);
}

int listOps(bool markdown) {
  auto schemas = ir::OpSchemaRegistry::global().all();
  if (markdown) {
    std::cout << "| domain | operator | opsets | CPU kernel |\n|---|---|---|---|\n";
  }
  for (const ir::OpSchema* s : schemas) {
    bool kernel = cpu::KernelRegistry::global().find(s->domain, s->opType) != nullptr;
    std::string domain = s->domain.empty() ? "ai.onnx" : s->domain;
    if (markdown) {
      std::cout << "| " << domain << " | " << s->opType << " | " << opsetRange(*s) << " | " << (kernel ? "yes" : "no")
                << " |\n";
    } else {
      std::cout << domain << "::" << s->opType << "  opsets " << opsetRange(*s) << (kernel ? "" : "  (no CPU kernel)")
                << "\n";
    }
  }
  if (!markdown) std::cout << schemas.size() << " operators\n";
  return 0;
}

}  // namespace

Action addOpsCommand(CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("ops", "List the operators kiln supports, with their opset ranges");
  cmd->add_flag("--markdown", *markdown, "print a Markdown table (as in docs/operators.md)");
  return [markdown] { return listOps(*markdown); };
}

}  // namespace kiln::cli
