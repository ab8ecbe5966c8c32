// The shared tree walk of the ai.onnx.ml tree ops (tree_forest.h).
#include "backends/cpu/kernels/tree_forest.h"

#include <cmath>

#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

bool goesTrue(const TreeForest& f, int64_t n, double x) {
  if (std::isnan(x) && !f.missingTrue.empty() && f.missingTrue[n]) return true;
  const double s = f.splits[n];
  switch (f.modes[n]) {
    case kBranchLeq:
      return x <= s;
    case kBranchLt:
      return x < s;
    case kBranchGte:
      return x >= s;
    case kBranchGt:
      return x > s;
    case kBranchEq:
      return x == s;
    case kBranchNeq:
      return x != s;
    default:
      return f.members[n].count(x) > 0;
  }
}

}  // namespace

void TreeForest::validate(const ir::Node& node, int64_t targets) const {
  const size_t count = splits.size();
  for (const auto* v : {&features, &modes, &trueIds, &falseIds}) {
    if (v->size() != count) ir::failNode(node, "every node attribute needs one entry per node");
  }
  if (trueLeaf.size() != count || falseLeaf.size() != count ||
      (!missingTrue.empty() && missingTrue.size() != count))
    ir::failNode(node, "every node attribute needs one entry per node");
  auto check = [&](int64_t i, size_t size, const std::string& what) {
    if (i < 0 || static_cast<size_t>(i) >= size)
      ir::failNode(node, what + " index " + std::to_string(i) + " is out of range (" +
                             std::to_string(size) + ")");
  };
  for (size_t n = 0; n < count; ++n) {
    check(trueIds[n], trueLeaf[n] ? leafCount() : count, "true branch");
    check(falseIds[n], falseLeaf[n] ? leafCount() : count, "false branch");
  }
  for (size_t t = 0; t < roots.size(); ++t)
    check(roots[t], rootIsLeaf[t] ? leafCount() : count, "tree root");
  for (int64_t t : weightTargets) check(t, static_cast<size_t>(targets), "leaf target");
}

int64_t TreeForest::leafOf(KernelContext& ctx, size_t tree, const double* row,
                           int64_t width) const {
  int64_t n = roots[tree];
  bool leaf = rootIsLeaf[tree];
  size_t steps = 0;
  while (!leaf) {
    if (features[n] < 0 || features[n] >= width)
      ctx.fail("node " + std::to_string(n) + " reads feature " + std::to_string(features[n]) +
                   ", outside X's " + std::to_string(width) + " features",
               ErrorCode::kInvalidArgument);
    const bool right = goesTrue(*this, n, row[features[n]]);
    leaf = right ? trueLeaf[n] : falseLeaf[n];
    n = right ? trueIds[n] : falseIds[n];
    if (++steps > splits.size()) ctx.fail("a tree has a cycle", ErrorCode::kInvalidModel);
  }
  return n;
}

TreeRows::TreeRows(KernelContext& ctx, const Tensor& x) : x_(x) {
  if (x.rank() != 1 && x.rank() != 2)
    ctx.fail("X must be (N, features) or (features), got " + x.describe(),
             ErrorCode::kInvalidArgument);
  rows_ = x.rank() == 1 ? 1 : x.dim(0);
  width_ = x.rank() == 1 ? x.dim(0) : x.dim(1);
  row_.resize(static_cast<size_t>(width_));
}

const double* TreeRows::row(int64_t r) {
  for (int64_t k = 0; k < width_; ++k) row_[k] = x_.doubleAt(r * width_ + k);
  return row_.data();
}

}  // namespace kiln::cpu
