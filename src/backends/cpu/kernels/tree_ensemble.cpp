// CPU kernel of TreeEnsemble (ai.onnx.ml opset 5): every tree routes each row of X from its root
// through branch nodes (x[feature] <mode> split, or NaN when missing values track true) to a
// leaf, whose weight is aggregated (sum, average, min or max) into the leaf's target column.
// The tree walk is tree_forest.h's, shared with TreeEnsembleClassifier / TreeEnsembleRegressor.
#include <cmath>
#include <limits>
#include <memory>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/tree_forest.h"

namespace kiln::cpu {
namespace {

std::vector<double> tensorDoubles(const ir::Node& node, const std::string& name) {
  const Tensor& t = ir::attrTensor(node, name);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.doubleAt(static_cast<int64_t>(i));
  return v;
}

std::vector<uint8_t> flags(const std::vector<int64_t>& v) {
  return std::vector<uint8_t>(v.begin(), v.end());
}

/// Set members, NaN-separated, in the order the MEMBER nodes appear.
void readMembers(const ir::Node& node, TreeForest& f) {
  f.members.resize(f.splits.size());
  const std::vector<double> pool = ir::hasAttr(node, "membership_values")
                                       ? tensorDoubles(node, "membership_values")
                                       : std::vector<double>{};
  size_t at = 0;
  for (size_t n = 0; n < f.splits.size(); ++n) {
    if (f.modes[n] != kBranchMember) continue;
    if (at >= pool.size())
      ir::failNode(node, "membership_values has no set for member node " + std::to_string(n));
    for (; at < pool.size() && !std::isnan(pool[at]); ++at) f.members[n].insert(pool[at]);
    ++at;  // the NaN that ends this set
  }
}

std::shared_ptr<TreeForest> forestOf(const ir::Node& node, int64_t targets) {
  auto f = std::make_shared<TreeForest>();
  f->splits = tensorDoubles(node, "nodes_splits");
  const std::vector<double> modes = tensorDoubles(node, "nodes_modes");
  f->modes.assign(modes.begin(), modes.end());
  f->features = ir::attrInts(node, "nodes_featureids");
  f->trueIds = ir::attrInts(node, "nodes_truenodeids");
  f->falseIds = ir::attrInts(node, "nodes_falsenodeids");
  f->trueLeaf = flags(ir::attrInts(node, "nodes_trueleafs"));
  f->falseLeaf = flags(ir::attrInts(node, "nodes_falseleafs"));
  f->missingTrue = flags(ir::attrInts(node, "nodes_missing_value_tracks_true", {}));
  f->weightTargets = ir::attrInts(node, "leaf_targetids");
  f->weights = tensorDoubles(node, "leaf_weights");
  if (f->weightTargets.size() != f->weights.size())
    ir::failNode(node, "leaf_targetids and leaf_weights differ in length");
  for (size_t l = 1; l <= f->weights.size(); ++l) f->leafStart.push_back(static_cast<int64_t>(l));
  f->roots = ir::attrInts(node, "tree_roots");
  if (f->trueLeaf.size() != f->splits.size() || f->falseLeaf.size() != f->splits.size())
    ir::failNode(node, "every nodes_* attribute needs one entry per node");
  for (int64_t root : f->roots) {
    // A root whose branches both lead to the same leaf is itself that leaf.
    const bool leaf = root >= 0 && static_cast<size_t>(root) < f->splits.size() &&
                      f->trueLeaf[root] && f->falseLeaf[root] &&
                      f->trueIds[root] == f->falseIds[root];
    f->rootIsLeaf.push_back(leaf);
    if (leaf) f->roots.back() = f->trueIds[root];
  }
  readMembers(node, *f);
  f->validate(node, targets);
  return f;
}

KernelFn makeTreeEnsemble(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  const int64_t targets = ir::attrInt(node, "n_targets");
  const int64_t aggregate = ir::attrInt(node, "aggregate_function", 1);
  if (aggregate < 0 || aggregate > 3) ir::failNode(node, "aggregate_function must be 0 to 3");
  auto f = forestOf(node, targets);

  return [f, targets, aggregate](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2)
      ctx.fail("X must be (N, features), got " + x.describe(), ErrorCode::kInvalidArgument);
    TreeRows rows(ctx, x);
    const double init = aggregate == 2   ? std::numeric_limits<double>::max()
                        : aggregate == 3 ? std::numeric_limits<double>::lowest()
                                         : 0.0;
    std::vector<double> result(static_cast<size_t>(rows.rows() * targets), init);
    for (int64_t r = 0; r < rows.rows(); ++r) {
      const double* row = rows.row(r);
      for (size_t t = 0; t < f->roots.size(); ++t) {
        const int64_t leaf = f->leafOf(ctx, t, row, rows.width());
        double& cell = result[r * targets + f->weightTargets[leaf]];
        const double w = f->weights[leaf];
        if (aggregate == 2)
          cell = std::min(cell, w);
        else if (aggregate == 3)
          cell = std::max(cell, w);
        else
          cell += aggregate == 0 ? w / static_cast<double>(f->roots.size()) : w;
      }
    }
    Tensor& y = ctx.allocateOutput(0, x.dtype(), {rows.rows(), targets});
    dispatchFloat(x.dtype(), "TreeEnsemble", [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (size_t i = 0; i < result.size(); ++i)
        y.data<T>()[i] = static_cast<T>(static_cast<ComputeType<T>>(result[i]));
    });
  };
}

KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "TreeEnsemble", KernelFactory(makeTreeEnsemble));

}  // namespace
}  // namespace kiln::cpu
