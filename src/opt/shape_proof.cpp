#include "opt/shape_proof.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "ir/node_attrs.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

// Where a dim comes from: a known number, or the dim `axis` of `value` (the furthest back it could
// be traced), with that dim's symbol if it has one.
struct DimFact {
  int64_t known = -1;
  std::string symbol;
  int value = ir::kNoValue;
  int64_t axis = -1;
};

bool sameFact(const DimFact& a, const DimFact& b) {
  if (a.known >= 0 || b.known >= 0) return a.known == b.known;
  if (!a.symbol.empty() && a.symbol == b.symbol) return true;
  return a.value != ir::kNoValue && a.value == b.value && a.axis == b.axis;
}

// One element of a 1-D int64 shape value: a number, or the dim of some value.
struct ShapeElement {
  std::optional<int64_t> number;
  int value = ir::kNoValue;
  int64_t axis = -1;
};

constexpr int kMaxDepth = 64;  // the trace follows producers; this bounds it on long chains

class Tracer {
 public:
  explicit Tracer(const ir::Graph& g) : g_(g) {}

  DimFact dim(int value, int64_t axis, int depth = 0) const {
    const auto& shape = g_.value(value).type.shape;
    if (!shape || axis < 0 || axis >= static_cast<int64_t>(shape->size())) return {};
    const ir::Dim& d = (*shape)[static_cast<size_t>(axis)];
    if (d.isKnown()) return DimFact{d.value, {}, ir::kNoValue, -1};
    const DimFact here{-1, d.symbol, value, axis};
    if (depth >= kMaxDepth) return here;
    const int producer = g_.value(value).producer;
    if (producer < 0) return here;
    const ir::Node& n = g_.nodes[static_cast<size_t>(producer)];
    if (n.outputs.empty() || n.outputs[0] != value) return here;
    std::optional<DimFact> traced = through(n, static_cast<size_t>(shape->size()), axis, depth + 1);
    if (!traced) return here;
    if (traced->symbol.empty()) traced->symbol = d.symbol;
    return *traced;
  }

 private:
  int64_t rankOf(int value) const {
    const auto& s = g_.value(value).type.shape;
    return s ? static_cast<int64_t>(s->size()) : -1;
  }

  bool isOne(int value, int64_t axis) const {
    const auto& s = g_.value(value).type.shape;
    return s && axis >= 0 && axis < static_cast<int64_t>(s->size()) &&
           (*s)[static_cast<size_t>(axis)].isKnown() && (*s)[static_cast<size_t>(axis)].value == 1;
  }

  // The dim `axis` of node n's first output (of rank `rank`) in terms of n's inputs.
  std::optional<DimFact> through(const ir::Node& n, size_t rank, int64_t axis, int depth) const {
    const std::string& op = n.opType;
    const int64_t r = static_cast<int64_t>(rank);
    if (n.domain == "kiln" && op == "FusedMatMul") return matMulRows(n, r, axis, depth);
    if (n.domain == "kiln" && op == "FusedAttention")
      return dim(n.inputs[axis < 3 ? 0 : 2], axis, depth);
    if (!n.domain.empty()) return std::nullopt;
    if (op == "MatMul") return matMulRows(n, r, axis, depth);
    if (op == "LayerNormalization" || op == "Softmax" || op == "Relu" || op == "Erf" ||
        op == "Sigmoid" || op == "Tanh" || op == "Cast" || op == "Identity" || op == "Neg" ||
        op == "Sqrt") {
      return rankOf(n.inputs[0]) == r ? std::optional(dim(n.inputs[0], axis, depth)) : std::nullopt;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div")
      return broadcastDim(n, r, axis, depth);
    if (op == "Transpose") {
      const std::vector<int64_t> perm = ir::attrInts(n, "perm", {});
      if (static_cast<int64_t>(perm.size()) != r) return std::nullopt;
      return dim(n.inputs[0], perm[static_cast<size_t>(axis)], depth);
    }
    if (op == "Reshape" && n.inputs.size() == 2) return reshapeDim(n, r, axis, depth);
    if (op == "Gather") {
      const int64_t dataRank = rankOf(n.inputs[0]), indexRank = rankOf(n.inputs[1]);
      if (dataRank < 1 || indexRank < 0) return std::nullopt;
      int64_t a = ir::attrInt(n, "axis", 0);
      if (a < 0) a += dataRank;
      if (axis < a) return dim(n.inputs[0], axis, depth);
      if (axis < a + indexRank) return dim(n.inputs[1], axis - a, depth);
      return dim(n.inputs[0], axis - indexRank + 1, depth);
    }
    return std::nullopt;
  }

  // MatMul by a 2-D right operand keeps the rows of A: every dim but the last.
  std::optional<DimFact> matMulRows(const ir::Node& n, int64_t rank, int64_t axis,
                                    int depth) const {
    if (n.inputs.size() < 2 || rankOf(n.inputs[1]) != 2 || rankOf(n.inputs[0]) != rank ||
        axis >= rank - 1) {
      return std::nullopt;
    }
    return dim(n.inputs[0], axis, depth);
  }

  // A broadcast dim is the other input's where one input lacks it or has 1; where both have it,
  // only when they trace to the same place.
  std::optional<DimFact> broadcastDim(const ir::Node& n, int64_t rank, int64_t axis,
                                      int depth) const {
    if (n.inputs.size() != 2) return std::nullopt;
    std::vector<std::pair<int, int64_t>>
        sides;  // (input, its axis) for inputs that have this dim > 1
    for (int in : n.inputs) {
      const int64_t inRank = rankOf(in);
      if (inRank < 0) return std::nullopt;
      const int64_t inAxis = axis - (rank - inRank);
      if (inAxis < 0 || isOne(in, inAxis)) continue;
      sides.emplace_back(in, inAxis);
    }
    if (sides.empty()) return std::nullopt;
    const DimFact first = dim(sides[0].first, sides[0].second, depth);
    if (sides.size() == 1) return first;
    if (sameFact(first, dim(sides[1].first, sides[1].second, depth))) return first;
    return std::nullopt;
  }

  std::optional<DimFact> reshapeDim(const ir::Node& n, int64_t rank, int64_t axis,
                                    int depth) const {
    const std::optional<std::vector<ShapeElement>> target = elements(n.inputs[1], depth);
    if (!target || static_cast<int64_t>(target->size()) != rank) return std::nullopt;
    const ShapeElement& e = (*target)[static_cast<size_t>(axis)];
    if (!e.number) return dim(e.value, e.axis, depth);
    const bool allowZero = n.opset >= 14 && ir::attrInt(n, "allowzero", 0) != 0;
    if (*e.number == 0 && !allowZero) return dim(n.inputs[0], axis, depth);
    if (*e.number > 0) return DimFact{*e.number, {}, ir::kNoValue, -1};
    return std::nullopt;  // -1: whatever is left
  }

  // The elements of a 1-D (or scalar) int64 value built from shapes, when each can be told.
  std::optional<std::vector<ShapeElement>> elements(int value, int depth) const {
    const int64_t valueRank = rankOf(value);
    if (depth >= kMaxDepth ||
        (g_.value(value).type.dtype != DataType::kInt64 &&
         g_.value(value).type.dtype != DataType::kInt32) ||
        valueRank < 0 || valueRank > 1) {
      return std::nullopt;
    }
    if (const Tensor* t = constantValue(g_, value)) {
      if (t->rank() > 1) return std::nullopt;
      std::vector<ShapeElement> out;
      for (int64_t v : t->toInt64Vector()) out.push_back(ShapeElement{v, ir::kNoValue, -1});
      return out;
    }
    const int producer = g_.value(value).producer;
    if (producer < 0) return std::nullopt;
    const ir::Node& n = g_.nodes[static_cast<size_t>(producer)];
    if (!n.domain.empty()) return std::nullopt;
    const std::string& op = n.opType;
    if (op == "Shape") {
      const int64_t rank = rankOf(n.inputs[0]);
      if (rank < 0) return std::nullopt;
      auto clampIndex = [rank](int64_t i) {
        return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
      };
      const int64_t start = n.opset >= 15 ? clampIndex(ir::attrInt(n, "start", 0)) : 0;
      const int64_t end = n.opset >= 15 ? clampIndex(ir::attrInt(n, "end", rank)) : rank;
      std::vector<ShapeElement> out;
      for (int64_t i = start; i < end; ++i)
        out.push_back(ShapeElement{std::nullopt, n.inputs[0], i});
      return out;
    }
    if (op == "Cast" || op == "Unsqueeze" || op == "Squeeze" || op == "Identity") {
      // Between 0-D and 1-D integer values these keep the elements in order.
      const DataType from = g_.value(n.inputs[0]).type.dtype;
      if (from != DataType::kInt64 && from != DataType::kInt32) return std::nullopt;
      return elements(n.inputs[0], depth + 1);
    }
    if (op == "Concat") {
      if (ir::attrInt(n, "axis", 0) != 0 && ir::attrInt(n, "axis", 0) != -1) return std::nullopt;
      std::vector<ShapeElement> out;
      for (int in : n.inputs) {
        auto part = elements(in, depth + 1);
        if (!part) return std::nullopt;
        out.insert(out.end(), part->begin(), part->end());
      }
      return out;
    }
    if (op == "Gather" && n.inputs.size() == 2 && ir::attrInt(n, "axis", 0) == 0) {
      auto from = elements(n.inputs[0], depth + 1);
      const Tensor* idx = constantValue(g_, n.inputs[1]);
      if (!from || !idx || idx->rank() > 1) return std::nullopt;
      std::vector<ShapeElement> out;
      const auto size = static_cast<int64_t>(from->size());
      for (int64_t i : idx->toInt64Vector()) {
        if (i < -size || i >= size) return std::nullopt;
        out.push_back((*from)[static_cast<size_t>(i < 0 ? i + size : i)]);
      }
      return out;
    }
    if (op == "Slice" && n.inputs.size() >= 3) {
      auto from = elements(n.inputs[0], depth + 1);
      const Tensor* starts = constantValue(g_, n.inputs[1]);
      const Tensor* ends = constantValue(g_, n.inputs[2]);
      const Tensor* axes = n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue
                               ? constantValue(g_, n.inputs[3])
                               : nullptr;
      const Tensor* steps = n.inputs.size() > 4 && n.inputs[4] != ir::kNoValue
                                ? constantValue(g_, n.inputs[4])
                                : nullptr;
      if (!from || !starts || !ends || starts->numel() != 1 || ends->numel() != 1)
        return std::nullopt;
      if (n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue &&
          (!axes || axes->toInt64Vector() != std::vector<int64_t>{0})) {
        if (!axes || axes->toInt64Vector() != std::vector<int64_t>{-1}) return std::nullopt;
      }
      if (n.inputs.size() > 4 && n.inputs[4] != ir::kNoValue &&
          (!steps || steps->toInt64Vector() != std::vector<int64_t>{1})) {
        return std::nullopt;
      }
      const auto size = static_cast<int64_t>(from->size());
      auto clampIndex = [size](int64_t i) {
        return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size);
      };
      const int64_t b = clampIndex(starts->toInt64Vector()[0]),
                    e = clampIndex(ends->toInt64Vector()[0]);
      return std::vector<ShapeElement>(from->begin() + b, from->begin() + std::max(b, e));
    }
    return std::nullopt;
  }

  const ir::Graph& g_;
};

}  // namespace

bool provablySameShape(const ir::Graph& graph, int a, int b) {
  const auto& sa = graph.value(a).type.shape;
  const auto& sb = graph.value(b).type.shape;
  if (!sa || !sb || sa->size() != sb->size()) return false;
  const Tracer tracer(graph);
  for (size_t i = 0; i < sa->size(); ++i) {
    const DimFact fa = tracer.dim(a, static_cast<int64_t>(i)),
                  fb = tracer.dim(b, static_cast<int64_t>(i));
    if (!sameFact(fa, fb)) return false;
  }
  return true;
}

bool provablySameDim(const ir::Graph& graph, int a, int64_t axisA, int b, int64_t axisB) {
  const Tracer tracer(graph);
  return sameFact(tracer.dim(a, axisA), tracer.dim(b, axisB));
}

}  // namespace kiln::opt
