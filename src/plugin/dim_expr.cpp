// DimExpr: output dims of a plugin as an expression tree over input dims.
#include <algorithm>

#include "kiln/error.h"
#include "kiln/plugin.h"

namespace kiln {

struct DimExpr::Node {
  Kind kind = Kind::kCONSTANT;
  int64_t value = 0;  // the constant, or the input index
  int axis = 0;
  std::shared_ptr<const Node> lhs, rhs;  // operands of binary expressions
};

DimExpr::DimExpr(int64_t value) {
  auto n = std::make_shared<Node>();
  n->value = value;
  node_ = std::move(n);
}

DimExpr DimExpr::inputDim(int input, int axis) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::kINPUT_DIM;
  n->value = input;
  n->axis = axis;
  return DimExpr(std::shared_ptr<const Node>(std::move(n)));
}

DimExpr DimExpr::binary(Kind kind, const DimExpr& a, const DimExpr& b) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->lhs = a.node_;
  n->rhs = b.node_;
  return DimExpr(std::shared_ptr<const Node>(std::move(n)));
}

DimExpr operator+(const DimExpr& a, const DimExpr& b) {
  return DimExpr::binary(DimExpr::Kind::kADD, a, b);
}
DimExpr operator-(const DimExpr& a, const DimExpr& b) {
  return DimExpr::binary(DimExpr::Kind::kSUB, a, b);
}
DimExpr operator*(const DimExpr& a, const DimExpr& b) {
  return DimExpr::binary(DimExpr::Kind::kMUL, a, b);
}
DimExpr operator/(const DimExpr& a, const DimExpr& b) {
  return DimExpr::binary(DimExpr::Kind::kFLOOR_DIV, a, b);
}
DimExpr ceilDiv(const DimExpr& a, const DimExpr& b) {
  return DimExpr::binary(DimExpr::Kind::kCEIL_DIV, a, b);
}
DimExpr max(const DimExpr& a, const DimExpr& b) {
  return DimExpr::binary(DimExpr::Kind::kMAX, a, b);
}
DimExpr min(const DimExpr& a, const DimExpr& b) {
  return DimExpr::binary(DimExpr::Kind::kMIN, a, b);
}

DimExpr::Kind DimExpr::kind() const { return node_->kind; }
int64_t DimExpr::value() const { return node_->value; }
int DimExpr::axis() const { return node_->axis; }
DimExpr DimExpr::lhs() const { return node_->lhs ? DimExpr(node_->lhs) : DimExpr(); }
DimExpr DimExpr::rhs() const { return node_->rhs ? DimExpr(node_->rhs) : DimExpr(); }

namespace {

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

std::optional<int64_t> DimExpr::evaluate(const std::vector<Shape>& inputShapes) const {
  const Node& n = *node_;
  switch (n.kind) {
    case Kind::kCONSTANT:
      return n.value;
    case Kind::kINPUT_DIM: {
      if (n.value < 0 || n.value >= static_cast<int64_t>(inputShapes.size())) return std::nullopt;
      const Shape& s = inputShapes[static_cast<size_t>(n.value)];
      if (n.axis < 0 || n.axis >= static_cast<int>(s.size()) || s[static_cast<size_t>(n.axis)] < 0)
        return std::nullopt;
      return s[static_cast<size_t>(n.axis)];
    }
    default:
      break;
  }
  auto a = lhs().evaluate(inputShapes);
  auto b = rhs().evaluate(inputShapes);
  if (!a || !b) return std::nullopt;
  switch (n.kind) {
    case Kind::kADD:
      return *a + *b;
    case Kind::kSUB:
      return *a - *b;
    case Kind::kMUL:
      return *a * *b;
    case Kind::kFLOOR_DIV:
      return *b == 0 ? std::nullopt : std::optional<int64_t>(floorDiv(*a, *b));
    case Kind::kCEIL_DIV:
      return *b == 0 ? std::nullopt : std::optional<int64_t>(-floorDiv(-*a, *b));
    case Kind::kMAX:
      return std::max(*a, *b);
    case Kind::kMIN:
      return std::min(*a, *b);
    default:
      return std::nullopt;
  }
}

std::string DimExpr::toString() const {
  const Node& n = *node_;
  auto call = [&](const char* f) {
    return std::string(f) + "(" + lhs().toString() + ", " + rhs().toString() + ")";
  };
  auto infix = [&](const char* op) {
    return "(" + lhs().toString() + " " + op + " " + rhs().toString() + ")";
  };
  switch (n.kind) {
    case Kind::kCONSTANT:
      return std::to_string(n.value);
    case Kind::kINPUT_DIM:
      return "in" + std::to_string(n.value) + "[" + std::to_string(n.axis) + "]";
    case Kind::kADD:
      return infix("+");
    case Kind::kSUB:
      return infix("-");
    case Kind::kMUL:
      return infix("*");
    case Kind::kFLOOR_DIV:
      return infix("/");
    case Kind::kCEIL_DIV:
      return call("ceilDiv");
    case Kind::kMAX:
      return call("max");
    case Kind::kMIN:
      return call("min");
  }
  return "?";
}

}  // namespace kiln
