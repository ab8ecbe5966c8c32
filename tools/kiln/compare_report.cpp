#include "compare_report.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <vector>

#include "onnx/loader.h"

namespace kiln::cli {

namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os << std::setprecision(4) << v;
  return os.str();
}

// JSON has no infinity or NaN: those become strings.
nlohmann::json jsonNumber(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

std::string producer(const TensorOrigin& origin) {
  return origin.node.empty() ? "(input or weight)"
                             : "node '" + origin.node + "' (" + origin.opType + ")";
}

}  // namespace

std::map<std::string, TensorOrigin> tensorOrigins(const std::string& modelPath) {
  ir::Model model = onnx_import::loadModel(modelPath);
  std::map<std::string, TensorOrigin> origins;
  for (size_t i = 0; i < model.graph.nodes.size(); ++i) {
    const ir::Node& node = model.graph.nodes[i];
    const std::string op = node.domain.empty() ? node.opType : node.domain + "::" + node.opType;
    for (int id : node.outputs)
      if (id != ir::kNoValue)
        origins[model.graph.value(id).name] = {static_cast<int>(i), node.name, op};
  }
  return origins;
}

bool CompareReport::passed() const {
  return std::all_of(tensors.begin(), tensors.end(),
                     [](const auto& t) { return t.first.passed(); });
}

const std::pair<TensorDiff, TensorOrigin>* CompareReport::firstFailure() const {
  for (const auto& t : tensors)
    if (!t.first.passed()) return &t;
  return nullptr;
}

CompareReport compareOutputs(const NamedTensors& tested, const NamedTensors& reference,
                             const std::map<std::string, TensorOrigin>& origins,
                             const Tolerance& tolerance) {
  CompareReport report;
  report.tolerance = tolerance;
  std::map<std::string, const Tensor*> references;
  for (const auto& [name, t] : reference) references.emplace(name, &t);
  std::map<std::string, bool> seen;
  for (const auto& [name, t] : tested) {
    if (seen[name]) continue;
    seen[name] = true;
    auto ref = references.find(name);
    if (ref == references.end()) {
      report.onlyTested.push_back(name);
      continue;
    }
    auto origin = origins.find(name);
    report.tensors.emplace_back(compareTensors(name, t, *ref->second, tolerance),
                                origin == origins.end() ? TensorOrigin{} : origin->second);
  }
  for (const auto& [name, t] : reference)
    if (!seen.count(name)) report.onlyReference.push_back(name);
  // Inputs and weights (order -1) first, then by producer; a node's outputs keep their order.
  std::stable_sort(report.tensors.begin(), report.tensors.end(),
                   [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
  return report;
}

CompareReport compareRuns(const ComparedRuns& runs,
                          const std::map<std::string, TensorOrigin>& origins,
                          const Tolerance& tolerance) {
  CompareReport report = compareOutputs(runs.tested, runs.reference, origins, tolerance);
  report.tested = runs.testedName;
  report.reference = runs.referenceName;
  return report;
}

void printReport(std::ostream& out, const CompareReport& report) {
  out << "tested:    " << report.tested << "\nreference: " << report.reference << "\ntolerance: ";
  if (report.tolerance.minSnrDb)
    out << "snr_db >= " << *report.tolerance.minSnrDb << " per tensor\n";
  else
    out << "|d| <= " << report.tolerance.atol << " + " << report.tolerance.rtol
        << " * |reference|\n";
  // Columns as wide as their widest cell, so long names and counts never run together.
  const std::vector<std::string> header = {"tensor", "max_abs", "max_rel",    "mean_abs",
                                           "cosine", "snr_db",  "mismatches", "result"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& [diff, origin] : report.tensors) {
    if (!diff.problem.empty()) {
      rows.push_back({diff.name});
      continue;
    }
    rows.push_back({diff.name, number(diff.maxAbs), number(diff.maxRel), number(diff.meanAbs),
                    number(diff.cosine), number(diff.snrDb),
                    std::to_string(diff.mismatches) + "/" + std::to_string(diff.elements),
                    diff.passed() ? "pass" : "FAIL"});
  }
  std::vector<size_t> widths(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    widths[c] = header[c].size();
    for (const auto& row : rows)
      if (c < row.size()) widths[c] = std::max(widths[c], row[c].size());
  }
  // The name and the result left-aligned, the numbers right-aligned; two spaces between.
  auto printRow = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      const bool left = c == 0 || c + 1 == header.size();
      out << (c ? "  " : "") << (left ? std::left : std::right)
          << std::setw(static_cast<int>(widths[c])) << cells[c];
    }
  };
  printRow(header);
  out << "  producer\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [diff, origin] = report.tensors[i];
    printRow(rows[i]);
    if (!diff.problem.empty())
      out << "  " << diff.problem << (diff.skipped ? "  skipped" : "  FAIL");
    out << "  " << producer(origin) << "\n";
  }
  const size_t failed =
      static_cast<size_t>(std::count_if(report.tensors.begin(), report.tensors.end(),
                                        [](const auto& t) { return !t.first.passed(); }));
  out << report.tensors.size() << " tensors compared, " << failed << " failed";
  if (!report.onlyTested.empty())
    out << "; " << report.onlyTested.size() << " only in the tested run";
  if (!report.onlyReference.empty())
    out << "; " << report.onlyReference.size() << " only in the reference";
  out << "\n";
  for (const std::string& line : report.notRead) out << "not compared: " << line << "\n";
  if (const auto* first = report.firstFailure()) {
    out << "first failing tensor in topological order: '" << first->first.name << "', computed by "
        << producer(first->second) << "\n";
  }
  out << (report.passed() ? "PASSED" : "FAILED") << "\n";
}

nlohmann::json reportJson(const CompareReport& report) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& [diff, origin] : report.tensors) {
    tensors.push_back({{"name", diff.name},
                       {"node", origin.node},
                       {"op_type", origin.opType},
                       {"passed", diff.passed()},
                       {"problem", diff.problem},
                       {"elements", diff.elements},
                       {"max_abs", jsonNumber(diff.maxAbs)},
                       {"max_rel", jsonNumber(diff.maxRel)},
                       {"mean_abs", jsonNumber(diff.meanAbs)},
                       {"cosine", jsonNumber(diff.cosine)},
                       {"snr_db", jsonNumber(diff.snrDb)},
                       {"mismatches", diff.mismatches},
                       {"non_finite", diff.nonFinite}});
  }
  nlohmann::json json = {
      {"tested", report.tested},
      {"reference", report.reference},
      {"atol", report.tolerance.atol},
      {"rtol", report.tolerance.rtol},
      {"min_snr_db", report.tolerance.minSnrDb ? nlohmann::json(*report.tolerance.minSnrDb)
                                               : nlohmann::json(nullptr)},
      {"passed", report.passed()},
      {"tensors", tensors},
      {"only_tested", report.onlyTested},
      {"only_reference", report.onlyReference},
      {"not_read", report.notRead},
      {"first_failure", nullptr}};
  if (const auto* first = report.firstFailure()) {
    json["first_failure"] = {{"tensor", first->first.name},
                             {"node", first->second.node},
                             {"op_type", first->second.opType}};
  }
  return json;
}

}  // namespace kiln::cli
