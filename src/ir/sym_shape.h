// Symbolic shapes: every dimension is a known value, a named symbol ("batch") or unknown.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/internal_api.h"
#include "kiln/tensor.h"

namespace kiln::ir {

struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // name of a symbolic dim ("batch"), empty if anonymous

  static Dim known(int64_t v) { return Dim{v, {}}; }
  static Dim named(std::string s) { return Dim{-1, std::move(s)}; }
  static Dim unknown() { return Dim{}; }
  bool isKnown() const { return value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
  std::string toString() const;  // "3", "batch" or "?"
};

using SymShape = std::vector<Dim>;

KILN_INTERNAL_API SymShape symShapeOf(const Shape& shape);
/// The concrete shape if every dim is known.
KILN_INTERNAL_API std::optional<Shape> concreteShape(const SymShape& shape);
KILN_INTERNAL_API std::string symShapeToString(const SymShape& shape);  // "batch x 3 x 224 x 224"

}  // namespace kiln::ir
