// CPU kernels of ai.onnx.ml TreeEnsembleClassifier and TreeEnsembleRegressor (opsets 1 and 3, the
// *_as_tensor attributes of 3 included): their (tree id, node id) node lists become a TreeForest
// (tree_forest.h, the walk TreeEnsemble uses), then the leaves' weights are aggregated per class
// or target, base values added and post_transform applied as onnxruntime does.
#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include "backends/cpu/kernels/ml_scores.h"
#include "backends/cpu/kernels/tree_forest.h"

namespace kiln::cpu {
namespace {

using ml::PostTransform;

int64_t legacyMode(const ir::Node& node, const std::string& mode) {
  static const std::map<std::string, int64_t> modes = {{"BRANCH_LEQ", kBranchLeq},
                                                       {"BRANCH_LT", kBranchLt},
                                                       {"BRANCH_GTE", kBranchGte},
                                                       {"BRANCH_GT", kBranchGt},
                                                       {"BRANCH_EQ", kBranchEq},
                                                       {"BRANCH_NEQ", kBranchNeq},
                                                       {"LEAF", -1}};
  const auto it = modes.find(mode);
  if (it == modes.end())
    ir::failNode(node, "attribute 'nodes_modes' has '" + mode +
                           "'; expected BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, BRANCH_EQ, "
                           "BRANCH_NEQ or LEAF");
  return it->second;
}

/// The forest of the nodes_* attributes, with the leaf weights `prefix`_treeids / _nodeids /
/// _ids / _weights (prefix "class" or "target").
std::shared_ptr<TreeForest> legacyForestOf(const ir::Node& node, const std::string& prefix,
                                           int64_t targets) {
  const std::vector<int64_t> treeIds = ir::attrInts(node, "nodes_treeids");
  const std::vector<int64_t> nodeIds = ir::attrInts(node, "nodes_nodeids");
  const std::vector<int64_t> featureIds = ir::attrInts(node, "nodes_featureids", {});
  const std::vector<std::string> modes = ir::attrStrings(node, "nodes_modes");
  const std::vector<double> values = ml::floatsOrTensor(node, "nodes_values");
  const std::vector<int64_t> trueIds = ir::attrInts(node, "nodes_truenodeids", {});
  const std::vector<int64_t> falseIds = ir::attrInts(node, "nodes_falsenodeids", {});
  const std::vector<int64_t> missing = ir::attrInts(node, "nodes_missing_value_tracks_true", {});
  const size_t count = treeIds.size();
  for (size_t size : {nodeIds.size(), featureIds.size(), modes.size(), values.size(),
                      trueIds.size(), falseIds.size()}) {
    if (size != count)
      ir::failNode(node, "the nodes_* attributes differ in length (" + std::to_string(size) +
                             " and " + std::to_string(count) + " nodes_treeids)");
  }
  if (!missing.empty() && missing.size() != count)
    ir::failNode(node, "nodes_missing_value_tracks_true needs one entry per node");

  // Each (tree, node) becomes a branch index or a leaf index.
  struct Slot {
    bool leaf;
    int64_t index;
  };
  std::map<std::pair<int64_t, int64_t>, Slot> slots;
  int64_t branches = 0, leaves = 0;
  for (size_t i = 0; i < count; ++i) {
    const bool leaf = legacyMode(node, modes[i]) < 0;
    if (!slots.emplace(std::make_pair(treeIds[i], nodeIds[i]), Slot{leaf, leaf ? leaves : branches})
             .second)
      ir::failNode(node, "tree " + std::to_string(treeIds[i]) + " lists node " +
                             std::to_string(nodeIds[i]) + " twice");
    ++(leaf ? leaves : branches);
  }
  auto f = std::make_shared<TreeForest>();
  auto child = [&](size_t i, int64_t id, uint8_t& isLeaf) {
    const auto it = slots.find({treeIds[i], id});
    if (it == slots.end())
      ir::failNode(node, "node " + std::to_string(nodeIds[i]) + " of tree " +
                             std::to_string(treeIds[i]) + " points to node " + std::to_string(id) +
                             ", which the tree does not have");
    isLeaf = it->second.leaf;
    return it->second.index;
  };
  std::set<std::pair<int64_t, int64_t>> children;
  for (size_t i = 0; i < count; ++i) {
    const int64_t mode = legacyMode(node, modes[i]);
    if (mode < 0) continue;
    uint8_t trueLeaf = 0, falseLeaf = 0;
    f->splits.push_back(values[i]);
    f->features.push_back(featureIds[i]);
    f->modes.push_back(mode);
    f->trueIds.push_back(child(i, trueIds[i], trueLeaf));
    f->falseIds.push_back(child(i, falseIds[i], falseLeaf));
    f->trueLeaf.push_back(trueLeaf);
    f->falseLeaf.push_back(falseLeaf);
    f->missingTrue.push_back(missing.empty() ? 0 : static_cast<uint8_t>(missing[i] != 0));
    children.insert({treeIds[i], trueIds[i]});
    children.insert({treeIds[i], falseIds[i]});
  }
  f->members.resize(f->splits.size());
  // The root of each tree: its one node that no branch points to.
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> rootsOfTree;
  for (const auto& [key, slot] : slots)
    if (!children.count(key)) rootsOfTree[key.first].push_back(key);
  std::set<int64_t> trees(treeIds.begin(), treeIds.end());
  for (int64_t tree : trees) {
    const auto& found = rootsOfTree[tree];
    if (found.size() != 1)
      ir::failNode(node, "tree " + std::to_string(tree) + " has " + std::to_string(found.size()) +
                             " root nodes (nodes no branch " + "points to); expected 1");
    const Slot& s = slots.at(found[0]);
    f->roots.push_back(s.index);
    f->rootIsLeaf.push_back(s.leaf);
  }
  // Leaf weights, grouped by leaf in the order given.
  const std::vector<int64_t> wTrees = ir::attrInts(node, prefix + "_treeids", {});
  const std::vector<int64_t> wNodes = ir::attrInts(node, prefix + "_nodeids", {});
  const std::vector<int64_t> wIds = ir::attrInts(node, prefix + "_ids", {});
  const std::vector<double> wValues = ml::floatsOrTensor(node, prefix + "_weights");
  if (wNodes.size() != wTrees.size() || wIds.size() != wTrees.size() ||
      wValues.size() != wTrees.size())
    ir::failNode(node, "the " + prefix + "_* attributes differ in length");
  std::vector<std::vector<std::pair<int64_t, double>>> perLeaf(static_cast<size_t>(leaves));
  for (size_t i = 0; i < wTrees.size(); ++i) {
    const auto it = slots.find({wTrees[i], wNodes[i]});
    if (it == slots.end() || !it->second.leaf)
      ir::failNode(node, prefix + " weight " + std::to_string(i) + " names node " +
                             std::to_string(wNodes[i]) + " of tree " + std::to_string(wTrees[i]) +
                             ", which is not a leaf");
    perLeaf[it->second.index].push_back({wIds[i], wValues[i]});
  }
  for (const auto& pairs : perLeaf) {
    for (const auto& [target, weight] : pairs) {
      f->weightTargets.push_back(target);
      f->weights.push_back(weight);
    }
    f->leafStart.push_back(static_cast<int64_t>(f->weights.size()));
  }
  f->validate(node, targets);
  return f;
}

/// Per-row sums (or min / max) of the leaves' weights, with whether a leaf reached each column.
struct Scores {
  std::vector<double> value;
  std::vector<uint8_t> has;
};

enum class Aggregate { kSum, kAverage, kMin, kMax };

void accumulate(KernelContext& ctx, const TreeForest& f, const double* row, int64_t width,
                Aggregate aggregate, Scores& s) {
  std::fill(s.value.begin(), s.value.end(), 0.0);
  std::fill(s.has.begin(), s.has.end(), 0);
  for (size_t t = 0; t < f.roots.size(); ++t) {
    const int64_t leaf = f.leafOf(ctx, t, row, width);
    for (int64_t w = f.leafStart[leaf]; w < f.leafStart[leaf + 1]; ++w) {
      const size_t c = static_cast<size_t>(f.weightTargets[w]);
      const double v = f.weights[w];
      if (aggregate == Aggregate::kMin)
        s.value[c] = s.has[c] ? std::min(s.value[c], v) : v;
      else if (aggregate == Aggregate::kMax)
        s.value[c] = s.has[c] ? std::max(s.value[c], v) : v;
      else
        s.value[c] += v;
      s.has[c] = 1;
    }
  }
}

Aggregate aggregateOf(const ir::Node& node) {
  const std::string name = ir::attrString(node, "aggregate_function", "SUM");
  if (name == "SUM") return Aggregate::kSum;
  if (name == "AVERAGE") return Aggregate::kAverage;
  if (name == "MIN") return Aggregate::kMin;
  if (name == "MAX") return Aggregate::kMax;
  ir::failNode(
      node, "attribute 'aggregate_function' is '" + name + "'; expected SUM, AVERAGE, MIN or MAX");
}

KernelFn makeTreeEnsembleRegressor(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  const int64_t targets = ir::attrInt(node, "n_targets", 1);
  if (targets <= 0) ir::failNode(node, "attribute 'n_targets' must be positive");
  auto f = legacyForestOf(node, "target", targets);
  const Aggregate aggregate = aggregateOf(node);
  const PostTransform transform = ml::postTransformOf(node);
  auto base = std::make_shared<std::vector<double>>(ml::floatsOrTensor(node, "base_values"));
  if (!base->empty() && base->size() != static_cast<size_t>(targets))
    ir::failNode(node, "attribute 'base_values' has " + std::to_string(base->size()) +
                           " values for " + std::to_string(targets) + " targets");
  return [f, targets, aggregate, transform, base](KernelContext& ctx) {
    TreeRows rows(ctx, ctx.input(0));
    Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, {rows.rows(), targets});
    Scores s{std::vector<double>(static_cast<size_t>(targets)),
             std::vector<uint8_t>(static_cast<size_t>(targets))};
    const double trees = static_cast<double>(f->roots.size());
    for (int64_t r = 0; r < rows.rows(); ++r) {
      accumulate(ctx, *f, rows.row(r), rows.width(), aggregate, s);
      float* yr = y.data<float>() + r * targets;
      for (int64_t c = 0; c < targets; ++c) {
        // As onnxruntime: with several targets, one that no leaf weighed is 0 (no base value).
        double v = s.has[c] ? s.value[c] : 0.0;
        if (aggregate == Aggregate::kAverage) v /= trees;
        if (!base->empty()) v += (*base)[c];
        yr[c] = targets > 1 && !s.has[c] ? 0.0f : static_cast<float>(v);
      }
      if (targets > 1)
        ml::transformRow(yr, targets, transform);
      else if (transform == PostTransform::kProbit)  // one target: only PROBIT applies
        yr[0] = ml::probit(yr[0]);
    }
  };
}

struct TreeClassifier {
  std::shared_ptr<TreeForest> forest;
  ml::ClassLabels labels;
  std::vector<double> base;
  PostTransform transform = PostTransform::kNone;
  bool binary = false;      // two classes, the leaves weigh only one of them
  bool allPositive = true;  // every leaf weight >= 0
};

/// Two classes: onnxruntime's reading of the scores (the spec leaves the binary case open): a
/// class no leaf weighed scores 0, one score becomes two columns by the rule `pairing` picks.
/// Writes z[0..1] and returns the label index.
size_t binaryScores(const TreeClassifier& m, Scores& s, float* z) {
  std::vector<double>& v = s.value;
  bool two = true;   // both columns come from the scores; else one score v[0] is paired
  int pairing = -1;  // 0, 1: a probability; 2, 3: a margin (pairBinaryScore); -1: alone
  if (m.base.size() == 2) {
    if (s.has[1]) {
      v[1] = m.base[1] + v[0];
      v[0] = -v[1];
    } else {
      v[1] += m.base[1];
      v[0] += m.base[0];
    }
  } else if (m.base.size() == 1) {
    v[0] += m.base[0];
    two = s.has[1];
  } else {
    pairing = 3;
    two = s.has[1];
  }
  auto score = [&](size_t c) { return s.has[c] ? v[c] : 0.0; };
  const double positive = two && s.has[1] ? v[1] : score(0);
  size_t label = positive > 0 ? 1 : 0;
  if (m.binary) {
    label = m.allPositive ? (positive > 0.5 ? 1 : 0) : label;
    pairing = m.allPositive ? (label ? 0 : 1) : (label ? 2 : 3);
  }
  if (two) {
    z[0] = static_cast<float>(score(0)), z[1] = static_cast<float>(score(1));
    ml::transformRow(z, 2, m.transform);
    return label;
  }
  const float one = static_cast<float>(score(0));
  z[1] = 0;
  if (m.transform == PostTransform::kProbit)
    z[0] = ml::probit(one);
  else if (pairing >= 0)
    ml::pairBinaryScore(one, z, pairing <= 1, m.transform);
  else
    z[0] = one;
  return label;
}

KernelFn makeTreeEnsembleClassifier(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  auto m = std::make_shared<TreeClassifier>();
  m->labels = ml::classLabelsOf(node, "classlabels_strings", "classlabels_int64s");
  const int64_t classes = static_cast<int64_t>(m->labels.size());
  m->forest = legacyForestOf(node, "class", classes);
  m->base = ml::floatsOrTensor(node, "base_values");
  m->transform = ml::postTransformOf(node);
  if (m->base.size() > static_cast<size_t>(classes))
    ir::failNode(node, "attribute 'base_values' has " + std::to_string(m->base.size()) +
                           " values for " + std::to_string(classes) + " classes");
  const std::set<int64_t> weighed(m->forest->weightTargets.begin(), m->forest->weightTargets.end());
  m->binary = classes == 2 && weighed.size() == 1;
  m->allPositive = std::all_of(m->forest->weights.begin(), m->forest->weights.end(),
                               [](double w) { return w >= 0; });
  return [m, classes](KernelContext& ctx) {
    TreeRows rows(ctx, ctx.input(0));
    Tensor& y = ml::allocateLabels(ctx, 0, m->labels, rows.rows());
    Tensor& z = ctx.allocateOutput(1, DataType::kFloat32, {rows.rows(), classes});
    Scores s{std::vector<double>(static_cast<size_t>(classes)),
             std::vector<uint8_t>(static_cast<size_t>(classes))};
    for (int64_t r = 0; r < rows.rows(); ++r) {
      accumulate(ctx, *m->forest, rows.row(r), rows.width(), Aggregate::kSum, s);
      float* zr = z.data<float>() + r * classes;
      if (classes == 2) {
        ml::setLabel(y, r, m->labels, binaryScores(*m, s, zr));
        continue;
      }
      for (size_t c = 0; c < m->base.size(); ++c) {
        s.value[c] += m->base[c];
        s.has[c] = 1;
      }
      // The best class among those with a score (the first on ties).
      int64_t best = -1;
      for (int64_t c = 0; c < classes; ++c)
        if (s.has[c] && (best < 0 || s.value[c] > s.value[best])) best = c;
      ml::setLabel(y, r, m->labels, static_cast<size_t>(std::max<int64_t>(best, 0)));
      for (int64_t c = 0; c < classes; ++c) zr[c] = static_cast<float>(s.value[c]);
      if (classes > 1)
        ml::transformRow(zr, classes, m->transform);
      else if (m->transform == PostTransform::kProbit)
        zr[0] = ml::probit(zr[0]);
    }
  };
}

KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "TreeEnsembleRegressor",
                                KernelFactory(makeTreeEnsembleRegressor));
KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "TreeEnsembleClassifier",
                                KernelFactory(makeTreeEnsembleClassifier));

}  // namespace
}  // namespace kiln::cpu
