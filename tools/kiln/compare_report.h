// `kiln compare`'s report: the compared tensors in the model's topological order, each with the
// ONNX node that produced it, the first that fails, as a table or as JSON.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "tensor_compare.h"

namespace kiln::cli {

/// Where a tensor comes from in the ONNX graph: its producer's position in topological order
/// (-1 for graph inputs and weights), name and op type.
struct TensorOrigin {
  int order = -1;
  std::string node;
  std::string opType;
};

/// The producer of every tensor of the model's top-level graph, by tensor name.
std::map<std::string, TensorOrigin> tensorOrigins(const std::string& modelPath);

/// What two configurations computed on the same inputs, and what each was.
struct ComparedRuns {
  NamedTensors tested, reference;
  std::string testedName, referenceName;
};

struct CompareReport {
  std::string tested, reference;  // what ran on each side
  Tolerance tolerance;
  std::vector<std::pair<TensorDiff, TensorOrigin>> tensors;  // topological order
  std::vector<std::string> onlyTested, onlyReference, notRead;
  bool passed() const;
  /// The first tensor in topological order that fails, or null.
  const std::pair<TensorDiff, TensorOrigin>* firstFailure() const;
};

/// Compares every tensor both sides have, ordered by their producers in `origins`.
CompareReport compareOutputs(const NamedTensors& tested, const NamedTensors& reference,
                             const std::map<std::string, TensorOrigin>& origins,
                             const Tolerance& tolerance);
CompareReport compareRuns(const ComparedRuns& runs,
                          const std::map<std::string, TensorOrigin>& origins,
                          const Tolerance& tolerance);

void printReport(std::ostream& out, const CompareReport& report);
nlohmann::json reportJson(const CompareReport& report);

}  // namespace kiln::cli
