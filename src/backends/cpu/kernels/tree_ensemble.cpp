// CPU kernel of TreeEnsemble (ai.onnx.ml opset 5): every tree routes each row of X from its root
// through branch nodes (x[feature] <mode> split, or NaN when missing values track true) to a
// leaf, whose weight is aggregated (sum, average, min or max) into the leaf's target column.
#include <cmath>
#include <limits>
#include <set>

#include "backends/cpu/kernels/elementwise_util.h"

namespace kiln::cpu {
namespace {

enum Mode : int64_t { kLeq = 0, kLt = 1, kGte = 2, kGt = 3, kEq = 4, kNeq = 5, kMember = 6 };

struct Forest {
  std::vector<double> splits, leafWeights;
  std::vector<int64_t> features, modes, trueIds, falseIds, trueLeaf, falseLeaf, leafTargets, roots,
      missingTrue;
  std::vector<std::set<double>> members;  // per node; filled for MEMBER nodes
  int64_t targets = 0, aggregate = 1;
};

std::vector<double> tensorDoubles(const ir::Node& node, const std::string& name) {
  const Tensor& t = ir::attrTensor(node, name);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.doubleAt(static_cast<int64_t>(i));
  return v;
}

bool goesTrue(const Forest& f, int64_t n, double x) {
  if (std::isnan(x) && !f.missingTrue.empty() && f.missingTrue[n]) return true;
  const double s = f.splits[n];
  switch (f.modes[n]) {
    case kLeq:
      return x <= s;
    case kLt:
      return x < s;
    case kGte:
      return x >= s;
    case kGt:
      return x > s;
    case kEq:
      return x == s;
    case kNeq:
      return x != s;
    default:
      return f.members[n].count(x) > 0;
  }
}

KernelFn makeTreeEnsemble(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  auto f = std::make_shared<Forest>();
  f->splits = tensorDoubles(node, "nodes_splits");
  const std::vector<double> modes = tensorDoubles(node, "nodes_modes");
  f->modes.assign(modes.begin(), modes.end());
  f->features = ir::attrInts(node, "nodes_featureids");
  f->trueIds = ir::attrInts(node, "nodes_truenodeids");
  f->falseIds = ir::attrInts(node, "nodes_falsenodeids");
  f->trueLeaf = ir::attrInts(node, "nodes_trueleafs");
  f->falseLeaf = ir::attrInts(node, "nodes_falseleafs");
  f->leafTargets = ir::attrInts(node, "leaf_targetids");
  f->leafWeights = tensorDoubles(node, "leaf_weights");
  f->roots = ir::attrInts(node, "tree_roots");
  f->missingTrue = ir::attrInts(node, "nodes_missing_value_tracks_true", {});
  f->targets = ir::attrInt(node, "n_targets");
  f->aggregate = ir::attrInt(node, "aggregate_function", 1);
  const size_t count = f->splits.size();
  for (const auto* v :
       {&f->features, &f->modes, &f->trueIds, &f->falseIds, &f->trueLeaf, &f->falseLeaf}) {
    if (v->size() != count) ir::failNode(node, "every nodes_* attribute needs one entry per node");
  }
  if (f->leafTargets.size() != f->leafWeights.size())
    ir::failNode(node, "leaf_targetids and leaf_weights differ in length");
  if (f->aggregate < 0 || f->aggregate > 3) ir::failNode(node, "aggregate_function must be 0 to 3");
  // Set members, NaN-separated, in the order the MEMBER nodes appear.
  f->members.resize(count);
  const std::vector<double> pool = ir::hasAttr(node, "membership_values")
                                       ? tensorDoubles(node, "membership_values")
                                       : std::vector<double>{};
  size_t at = 0;
  for (size_t n = 0; n < count; ++n) {
    if (f->modes[n] != kMember) continue;
    if (at >= pool.size())
      ir::failNode(node, "membership_values has no set for member node " + std::to_string(n));
    for (; at < pool.size() && !std::isnan(pool[at]); ++at) f->members[n].insert(pool[at]);
    ++at;  // the NaN that ends this set
  }
  auto checkIndex = [&](int64_t i, size_t size, const char* what) {
    if (i < 0 || static_cast<size_t>(i) >= size)
      ir::failNode(node, std::string(what) + " index " + std::to_string(i) + " is out of range");
  };
  for (size_t n = 0; n < count; ++n) {
    checkIndex(f->trueIds[n], f->trueLeaf[n] ? f->leafWeights.size() : count, "true branch");
    checkIndex(f->falseIds[n], f->falseLeaf[n] ? f->leafWeights.size() : count, "false branch");
  }
  for (int64_t t : f->leafTargets) checkIndex(t, static_cast<size_t>(f->targets), "leaf target");

  return [f](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2)
      ctx.fail("X must be (N, features), got " + x.describe(), ErrorCode::kInvalidArgument);
    const int64_t rows = x.dim(0), width = x.dim(1);
    const double init = f->aggregate == 2   ? std::numeric_limits<double>::max()
                        : f->aggregate == 3 ? std::numeric_limits<double>::lowest()
                                            : 0.0;
    std::vector<double> result(static_cast<size_t>(rows * f->targets), init);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t root : f->roots) {
        int64_t n = root;
        // A root whose branches both lead to the same leaf is itself that leaf.
        bool leaf = f->trueLeaf[n] && f->falseLeaf[n] && f->trueIds[n] == f->falseIds[n];
        size_t guard = 0;
        while (!leaf) {
          if (f->features[n] < 0 || f->features[n] >= width)
            ctx.fail("feature " + std::to_string(f->features[n]) + " is outside X",
                     ErrorCode::kInvalidArgument);
          const bool right = goesTrue(*f, n, x.doubleAt(r * width + f->features[n]));
          leaf = right ? f->trueLeaf[n] : f->falseLeaf[n];
          n = right ? f->trueIds[n] : f->falseIds[n];
          if (++guard > f->splits.size()) ctx.fail("a tree has a cycle", ErrorCode::kInvalidModel);
        }
        double& cell = result[r * f->targets + f->leafTargets[n]];
        const double w = f->leafWeights[n];
        if (f->aggregate == 2)
          cell = std::min(cell, w);
        else if (f->aggregate == 3)
          cell = std::max(cell, w);
        else
          cell += f->aggregate == 0 ? w / static_cast<double>(f->roots.size()) : w;
      }
    }
    Tensor& y = ctx.allocateOutput(0, x.dtype(), {rows, f->targets});
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
