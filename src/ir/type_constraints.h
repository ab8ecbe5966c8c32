// Which tensor dtypes each operator input accepts, as ONNX type constraints ("T": float16, float,
// ...) narrowed to what kiln's kernels implement. Shape inference checks a node's inputs against
// them so a wrong dtype fails early with a clear message rather than deep inside a kernel.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/internal_api.h"
#include "ir/graph.h"

namespace kiln::ir {

/// A set of DataTypes: bit i is DataType(i).
using DTypeSet = uint64_t;
constexpr DTypeSet dtypeBit(DataType t) { return DTypeSet{1} << static_cast<int>(t); }
inline bool dtypeSetHas(DTypeSet set, DataType t) { return (set & dtypeBit(t)) != 0; }
/// "float16, float32, int64": kiln's dtype names, floats first, then int, uint, bool, string,
/// others.
KILN_INTERNAL_API std::string dtypeSetToString(DTypeSet set);
/// Like dtypeSetToString with runs of one family collapsed: "float16..float64, int8..int64, bool";
/// "float8_*" stands for float8_e4m3fn, float8_e4m3fnuz, float8_e5m2 and float8_e5m2fnuz together.
KILN_INTERNAL_API std::string dtypeSetToCompactString(DTypeSet set);

struct TypeConstraint {
  std::string name;      // the type variable ("T"), or a fixed type ("tensor(int64)")
  DTypeSet allowed = 0;  // what kiln accepts; 0: not checked (a sequence/optional-only variable)
  DTypeSet onnxAllowed = 0;  // what ONNX allows (tells an unsupported dtype from an invalid model)
  std::string note;          // why kiln accepts fewer than ONNX; empty when it does not
};

/// An operator's types from one ONNX version (sinceVersion) until the next.
struct KILN_INTERNAL_API TypeSignature {
  int64_t sinceVersion = 1;
  std::vector<std::string> inputs;   // the constraint name of each input ("" or "-": not checked)
  bool variadicInputs = false;       // the last entry covers every further input
  std::vector<bool> optionalInputs;  // per entry of inputs: ONNX marks it optional (it may be "")
  std::vector<std::string> outputs;
  bool variadicOutputs = false;
  std::vector<TypeConstraint> constraints;

  const TypeConstraint* constraint(const std::string& name) const;
  /// The constraint input i is bound to, or nullptr if it is not checked.
  const TypeConstraint* inputConstraint(size_t i) const;
};

/// An OpSchema's type constraints: the signatures of the ONNX versions its opset range covers.
struct KILN_INTERNAL_API OpTypes {
  std::vector<TypeSignature> signatures;  // by sinceVersion; empty: dtypes not checked
  std::string note;                       // op-wide note (why the dtypes are not checked, say)

  /// The signature in effect at `opset`, or nullptr.
  const TypeSignature* at(int64_t opset) const;
};

/// ONNX's constraints for (domain, opType) over opsets [minOpset, maxOpset], narrowed by kiln's
/// kernel limits (kiln_dtype_limits.cpp). A version also accepts the dtypes later versions add for
/// the same variable, since kiln runs the same kernel at every opset.
KILN_INTERNAL_API OpTypes kilnOpTypes(const std::string& domain, const std::string& opType,
                                      int64_t minOpset, int64_t maxOpset);

struct OpSchema;
/// kilnOpTypes for the schema's (domain, opType, opset range), computed once and cached.
KILN_INTERNAL_API const OpTypes& opTypesOf(const OpSchema& schema);

/// Fails (naming the node, input, dtype and what is accepted) if an input's dtype is not allowed.
/// `inputs[i]` is nullptr for omitted inputs; sequences, optionals and unknown dtypes are not
/// checked.
KILN_INTERNAL_API void checkInputTypes(const Node& node, const OpTypes& types,
                                       const std::vector<const TypeInfo*>& inputs,
                                       const std::vector<std::string>& inputNames);

/// A kiln narrowing of ONNX's constraints: on (domain, opType), variable `var` ("*" = every one)
/// keeps only `allowed`, because of `reason`. allowed == 0 with var "*" leaves the op unchecked.
struct DTypeLimit {
  const char* domain;
  const char* opType;
  const char* var;
  DTypeSet allowed;
  const char* reason;
};
extern const DTypeLimit kDTypeLimits[];
extern const size_t kDTypeLimitCount;

}  // namespace kiln::ir
