#include "onnx/node_schema_check.h"

#include <map>
#include <set>
#include <sstream>

#include "ir/onnx_type_table.h"
#include "ir/op_schema.h"

namespace kiln::onnx_import {

namespace {

bool isOnnxDomain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx" || domain == "ai.onnx.ml";
}

std::string domainKey(const std::string& domain) { return domain == "ai.onnx" ? "" : domain; }

// The row in effect at `opset` (the newest version not after it), or nullptr; `first` receives the
// operator's first version when it has any row at all (0 otherwise).
const ir::OnnxOperatorRow* rowAt(const std::string& domain, const std::string& opType,
                                 int64_t opset, int& first) {
  const ir::OnnxOperatorRow* best = nullptr;
  first = 0;
  for (size_t i = 0; i < ir::kOnnxOperatorRowCount; ++i) {
    const ir::OnnxOperatorRow& r = ir::kOnnxOperatorRows[i];
    if (r.domain != domain || r.opType != opType) continue;
    if (first == 0 || r.sinceVersion < first) first = r.sinceVersion;
    if (r.sinceVersion <= opset && (!best || r.sinceVersion > best->sinceVersion)) best = &r;
  }
  return best;
}

// "alpha:float axis:int!" -> name -> (type, required).
std::map<std::string, std::pair<std::string, bool>> declaredAttributes(const char* text) {
  std::map<std::string, std::pair<std::string, bool>> out;
  std::istringstream in(text);
  std::string item;
  while (in >> item) {
    const size_t colon = item.find(':');
    const bool required = item.back() == '!';
    std::string type = item.substr(colon + 1, item.size() - colon - 1 - (required ? 1 : 0));
    out[item.substr(0, colon)] = {type, required};
  }
  return out;
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string countRange(int lo, int hi) {
  if (lo == hi) return std::to_string(lo);
  return hi >= 2147483647 ? std::to_string(lo) + " or more"
                          : std::to_string(lo) + " to " + std::to_string(hi);
}

void checkCounts(const onnx::NodeProto& node, const std::string& label, const std::string& version,
                 const ir::OnnxOperatorRow& row, std::vector<ModelProblem>& problems) {
  if (node.input_size() < row.minInputs || node.input_size() > row.maxInputs) {
    problems.push_back({"operator-inputs", label + " has " + std::to_string(node.input_size()) +
                                               " inputs; " + version + " takes " +
                                               countRange(row.minInputs, row.maxInputs)});
  }
  if (node.output_size() < row.minOutputs || node.output_size() > row.maxOutputs) {
    problems.push_back({"operator-outputs", label + " has " + std::to_string(node.output_size()) +
                                                " outputs; " + version + " gives " +
                                                countRange(row.minOutputs, row.maxOutputs)});
  }
}

void checkAttributes(const onnx::NodeProto& node, const std::string& label,
                     const std::string& version, const ir::OnnxOperatorRow& row,
                     std::vector<ModelProblem>& problems) {
  const auto declared = declaredAttributes(row.attributes);
  std::set<std::string> seen;
  for (const onnx::AttributeProto& a : node.attribute()) {
    const std::string where = label + " attribute '" + a.name() + "'";
    if (!seen.insert(a.name()).second) {
      problems.push_back({"attribute", where + " is given twice"});
      continue;
    }
    auto it = declared.find(a.name());
    if (it == declared.end()) {
      problems.push_back({"attribute", where + " is not an attribute of " + version});
      continue;
    }
    if (!a.ref_attr_name().empty())
      continue;  // a function's attribute reference: typed by the function
    const std::string given = lowercase(onnx::AttributeProto::AttributeType_Name(a.type()));
    if (a.type() == onnx::AttributeProto::UNDEFINED) {
      problems.push_back({"attribute", where + " has no type (AttributeProto.type is not set); " +
                                           version + " expects " + it->second.first});
    } else if (given != it->second.first) {
      problems.push_back({"attribute", where + " has type " + given + "; " + version + " expects " +
                                           it->second.first});
    }
  }
  for (const auto& [name, spec] : declared) {
    if (spec.second && !seen.count(name)) {
      problems.push_back({"attribute", label + " lacks attribute '" + name + "' (" + spec.first +
                                           "), which " + version + " requires"});
    }
  }
}

}  // namespace

void checkNodeSchema(const onnx::NodeProto& node, const std::string& label, int64_t opset,
                     std::vector<ModelProblem>& problems) {
  if (!isOnnxDomain(node.domain())) return;
  const std::string domain = domainKey(node.domain());
  // kiln's own `Plugin` node (docs/plugins.md, the simple path) lives in the default domain.
  if (domain.empty() && node.op_type() == "Plugin") return;
  const std::string domainName = domain.empty() ? "ai.onnx" : domain;
  int first = 0;
  const ir::OnnxOperatorRow* row = rowAt(domain, node.op_type(), opset, first);
  if (!row && first == 0 && ir::OpSchemaRegistry::global().find(domain, node.op_type(), opset)) {
    return;  // not an ONNX operator, but a plugin registered under its name runs it
             // (docs/plugins.md)
  }
  if (!row) {
    problems.push_back(
        {"operator-schema",
         label + ": " + domainName + " has no operator '" + node.op_type() + "'" +
             (first ? " at opset " + std::to_string(opset) + " (it first appears in opset " +
                          std::to_string(first) + ")"
                    : "")});
    return;
  }
  const std::string version = node.op_type() + "-" + std::to_string(row->sinceVersion);
  if (row->deprecated) {
    problems.push_back({"operator-schema", label + ": " + node.op_type() + " is deprecated at " +
                                               domainName + " opset " + std::to_string(opset) +
                                               " (since version " +
                                               std::to_string(row->sinceVersion) + ")"});
    return;
  }
  checkCounts(node, label, version, *row, problems);
  checkAttributes(node, label, version, *row, problems);
}

}  // namespace kiln::onnx_import
