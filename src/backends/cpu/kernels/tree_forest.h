// The one tree evaluator of the ai.onnx.ml tree ops: TreeEnsemble (ai.onnx.ml 5) and the older
// TreeEnsembleClassifier / TreeEnsembleRegressor (1 and 3) each build a TreeForest from their own
// attributes, then route every row of X from each root through branch nodes to a leaf.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"

namespace kiln::cpu {

/// Branch comparisons: x <mode> split (x in the set for kMember); the order of TreeEnsemble's
/// nodes_modes values.
enum TreeBranchMode : int64_t {
  kBranchLeq = 0,
  kBranchLt = 1,
  kBranchGte = 2,
  kBranchGt = 3,
  kBranchEq = 4,
  kBranchNeq = 5,
  kBranchMember = 6
};

struct TreeForest {
  // Branch nodes.
  std::vector<double> splits;
  std::vector<int64_t> features, modes, trueIds, falseIds;  // ids: a branch or a leaf index
  std::vector<uint8_t> trueLeaf, falseLeaf, missingTrue;    // missingTrue: NaN goes true
  std::vector<std::set<double>> members;                    // per branch; for kBranchMember
  // Trees: the root of each, a branch or (rootIsLeaf) a leaf.
  std::vector<int64_t> roots;
  std::vector<uint8_t> rootIsLeaf;
  // Leaves: leaf l holds the (target, weight) pairs [leafStart[l], leafStart[l + 1]).
  std::vector<int64_t> leafStart{0}, weightTargets;
  std::vector<double> weights;

  size_t leafCount() const { return leafStart.size() - 1; }
  /// Checks every index (children, leaves, targets < `targets`), naming the node on failure.
  void validate(const ir::Node& node, int64_t targets) const;
  /// The leaf that `row` (of `width` features) reaches in tree `tree`.
  int64_t leafOf(KernelContext& ctx, size_t tree, const double* row, int64_t width) const;
};

/// X's rows as doubles, one at a time (trees compare in the input's precision or better).
class TreeRows {
 public:
  TreeRows(KernelContext& ctx, const Tensor& x);
  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }
  const double* row(int64_t r);

 private:
  const Tensor& x_;
  int64_t rows_ = 0, width_ = 0;
  std::vector<double> row_;
};

}  // namespace kiln::cpu
