#include "ir/type_constraints.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <utility>

#include "ir/node_attrs.h"
#include "ir/onnx_type_table.h"
#include "ir/op_schema.h"

namespace kiln::ir {

namespace {

// ONNX's element type names (as in "tensor(float)") to kiln's DataType.
DataType dtypeFromOnnxName(const std::string& name) {
  static const std::pair<const char*, DataType> kNames[] = {
      {"float", DataType::kFloat32},
      {"uint8", DataType::kUint8},
      {"int8", DataType::kInt8},
      {"uint16", DataType::kUint16},
      {"int16", DataType::kInt16},
      {"int32", DataType::kInt32},
      {"int64", DataType::kInt64},
      {"string", DataType::kString},
      {"bool", DataType::kBool},
      {"float16", DataType::kFloat16},
      {"double", DataType::kFloat64},
      {"uint32", DataType::kUint32},
      {"uint64", DataType::kUint64},
      {"complex64", DataType::kComplex64},
      {"complex128", DataType::kComplex128},
      {"bfloat16", DataType::kBFloat16},
      {"float8e4m3fn", DataType::kFloat8E4M3FN},
      {"float8e4m3fnuz", DataType::kFloat8E4M3FNUZ},
      {"float8e5m2", DataType::kFloat8E5M2},
      {"float8e5m2fnuz", DataType::kFloat8E5M2FNUZ},
      {"uint4", DataType::kUint4},
      {"int4", DataType::kInt4},
      {"float4e2m1", DataType::kFloat4E2M1},
      {"float8e8m0", DataType::kFloat8E8M0},
      {"uint2", DataType::kUint2},
      {"int2", DataType::kInt2},
  };
  for (const auto& [n, t] : kNames) {
    if (name == n) return t;
  }
  return DataType::kUndefined;
}

std::vector<std::string> splitWords(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

void parseParams(const char* text, std::vector<std::string>& names, bool& variadic,
                 std::vector<bool>* optional) {
  names = splitWords(text);
  variadic = !names.empty() && names.back().back() == '*';
  if (variadic) names.back().pop_back();
  for (std::string& name : names) {
    const bool isOptional = name.back() == '?';
    if (isOptional) name.pop_back();
    if (optional) optional->push_back(isOptional);
  }
}

// "T: float16 float; T1: int64" -> constraints with ONNX's sets (kiln's own set starts equal).
std::vector<TypeConstraint> parseConstraints(const std::string& text) {
  std::vector<TypeConstraint> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("; ", pos);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(pos, end - pos);
    size_t colon = part.find(": ");
    TypeConstraint c;
    c.name = part.substr(0, colon == std::string::npos ? part.size() : colon);
    if (colon != std::string::npos) {
      for (const std::string& t : splitWords(part.substr(colon + 2))) {
        DataType d = dtypeFromOnnxName(t);
        if (d != DataType::kUndefined) c.onnxAllowed |= dtypeBit(d);
      }
    }
    out.push_back(std::move(c));
    pos = end + 2;
  }
  return out;
}

DTypeSet holdableDTypes() {
  DTypeSet s = 0;
  for (int i = 1; i < 64; ++i) {
    if (isSupportedDataType(static_cast<DataType>(i))) s |= dtypeBit(static_cast<DataType>(i));
  }
  return s;
}

}  // namespace

namespace {

// Display order: floats, signed then unsigned integers by width, bool, string, then the rest
// (low-precision types) in DataType order.
std::vector<DataType> displayOrder() {
  std::vector<DataType> order = {DataType::kFloat16,  DataType::kFloat32, DataType::kFloat64,
                                 DataType::kBFloat16, DataType::kInt8,    DataType::kInt16,
                                 DataType::kInt32,    DataType::kInt64,   DataType::kUint8,
                                 DataType::kUint16,   DataType::kUint32,  DataType::kUint64,
                                 DataType::kBool,     DataType::kString};
  for (int i = 1; i < 64; ++i) {
    auto t = static_cast<DataType>(i);
    if (std::find(order.begin(), order.end(), t) == order.end()) order.push_back(t);
  }
  return order;
}

}  // namespace

std::string dtypeSetToString(DTypeSet set) {
  static const std::vector<DataType> kOrder = displayOrder();
  std::string out;
  for (DataType t : kOrder) {
    if (!dtypeSetHas(set, t)) continue;
    if (!out.empty()) out += ", ";
    out += dataTypeName(t);
  }
  return out;
}

std::string dtypeSetToCompactString(DTypeSet set) {
  // Families in width order; a run of 2+ consecutive members prints as "first..last".
  static const std::vector<std::vector<DataType>> kFamilies = {
      {DataType::kFloat16, DataType::kFloat32, DataType::kFloat64},
      {DataType::kBFloat16},
      {DataType::kInt8, DataType::kInt16, DataType::kInt32, DataType::kInt64},
      {DataType::kUint8, DataType::kUint16, DataType::kUint32, DataType::kUint64},
      {DataType::kBool},
      {DataType::kString},
  };
  std::vector<std::string> parts;
  DTypeSet rest = set;
  for (const auto& family : kFamilies) {
    for (size_t i = 0; i < family.size();) {
      if (!dtypeSetHas(set, family[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j + 1 < family.size() && dtypeSetHas(set, family[j + 1])) ++j;
      std::string first = dataTypeName(family[i]);
      parts.push_back(j - i >= 2 ? first + ".." + dataTypeName(family[j])
                                 : (j > i ? first + ", " + dataTypeName(family[j]) : first));
      for (size_t k = i; k <= j; ++k) rest &= ~dtypeBit(family[k]);
      i = j + 1;
    }
  }
  const DTypeSet float8 = dtypeBit(DataType::kFloat8E4M3FN) | dtypeBit(DataType::kFloat8E4M3FNUZ) |
                          dtypeBit(DataType::kFloat8E5M2) | dtypeBit(DataType::kFloat8E5M2FNUZ);
  if ((rest & float8) == float8) {
    parts.push_back("float8_*");  // the four e4m3/e5m2 kinds (float8_e8m0fnu is listed on its own)
    rest &= ~float8;
  }
  if (rest) parts.push_back(dtypeSetToString(rest));  // the other low-precision types, one by one
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

const TypeConstraint* TypeSignature::constraint(const std::string& name) const {
  for (const TypeConstraint& c : constraints) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const TypeConstraint* TypeSignature::inputConstraint(size_t i) const {
  if (inputs.empty()) return nullptr;
  if (i >= inputs.size()) {
    if (!variadicInputs) return nullptr;
    i = inputs.size() - 1;
  }
  const TypeConstraint* c = constraint(inputs[i]);
  return c && c->allowed ? c : nullptr;
}

const TypeSignature* OpTypes::at(int64_t opset) const {
  const TypeSignature* found = nullptr;
  for (const TypeSignature& s : signatures) {
    if (s.sinceVersion <= opset) found = &s;
  }
  return found;
}

OpTypes kilnOpTypes(const std::string& domain, const std::string& opType, int64_t minOpset,
                    int64_t maxOpset) {
  OpTypes types;
  std::vector<const OnnxTypeRow*> rows;
  for (size_t i = 0; i < kOnnxTypeRowCount; ++i) {
    const OnnxTypeRow& r = kOnnxTypeRows[i];
    if (r.domain == domain && r.opType == opType) rows.push_back(&r);
  }
  std::sort(rows.begin(), rows.end(),
            [](auto* a, auto* b) { return a->sinceVersion < b->sinceVersion; });
  for (size_t i = 0; i < rows.size(); ++i) {
    // Versions before the one in effect at minOpset, or after maxOpset, are never used.
    if (i + 1 < rows.size() && rows[i + 1]->sinceVersion <= minOpset) continue;
    if (rows[i]->sinceVersion > maxOpset) break;
    TypeSignature s;
    s.sinceVersion = rows[i]->sinceVersion;
    parseParams(rows[i]->inputs, s.inputs, s.variadicInputs, &s.optionalInputs);
    parseParams(rows[i]->outputs, s.outputs, s.variadicOutputs, nullptr);
    s.constraints = parseConstraints(rows[i]->constraints);
    types.signatures.push_back(std::move(s));
  }
  // kiln's kernels do not change with the opset: an old version accepts what later ones added.
  for (size_t i = types.signatures.size(); i-- > 0;) {
    for (TypeConstraint& c : types.signatures[i].constraints) {
      if (i + 1 < types.signatures.size()) {
        if (const TypeConstraint* later = types.signatures[i + 1].constraint(c.name))
          c.onnxAllowed |= later->onnxAllowed;
      }
      c.allowed = c.onnxAllowed & holdableDTypes();
    }
  }
  for (size_t i = 0; i < kDTypeLimitCount; ++i) {
    const DTypeLimit& limit = kDTypeLimits[i];
    if (limit.domain != domain || limit.opType != opType) continue;
    const bool everyVar = std::strcmp(limit.var, "*") == 0;
    if (everyVar && limit.allowed == 0) {
      types.signatures.clear();
      types.note = limit.reason;
      return types;
    }
    for (TypeSignature& s : types.signatures) {
      for (TypeConstraint& c : s.constraints) {
        if (!everyVar && c.name != limit.var) continue;
        c.note = limit.reason;
        c.allowed &= limit.allowed;
      }
    }
  }
  return types;
}

const OpTypes& opTypesOf(const OpSchema& schema) {
  using Key = std::tuple<std::string, std::string, int64_t, int64_t>;
  static std::mutex mutex;
  static std::map<Key, OpTypes> cache;  // map nodes never move: the references stay valid
  std::lock_guard<std::mutex> lock(mutex);
  Key key{schema.domain, schema.opType, schema.minOpset, schema.maxOpset};
  auto it = cache.find(key);
  if (it == cache.end()) {
    it = cache
             .emplace(key,
                      kilnOpTypes(schema.domain, schema.opType, schema.minOpset, schema.maxOpset))
             .first;
  }
  return it->second;
}

void checkInputTypes(const Node& node, const OpTypes& types,
                     const std::vector<const TypeInfo*>& inputs,
                     const std::vector<std::string>& inputNames) {
  const TypeSignature* sig = types.at(node.opset);
  if (!sig) return;
  // A required input given as "" (or left out) would reach the kernel as nothing.
  const size_t fixedInputs =
      sig->inputs.size() - (sig->variadicInputs ? 1 : 0);  // variadic arity is the op's own check
  for (size_t i = 0; i < fixedInputs; ++i) {
    if (sig->optionalInputs[i] || (i < inputs.size() && inputs[i])) continue;
    failNode(
        node,
        "input " + std::to_string(i) + " is required by " + node.opType + "-" +
            std::to_string(sig->sinceVersion) + " but the node " +
            (i < node.inputs.size() ? "gives the empty name \"\""
                                    : "has only " + std::to_string(node.inputs.size()) + " inputs"),
        ErrorCode::kInvalidModel);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TypeInfo* t = inputs[i];
    if (!t || t->isSequence || t->isOptional || t->dtype == DataType::kUndefined) continue;
    const TypeConstraint* c = sig->inputConstraint(i);
    if (!c || dtypeSetHas(c->allowed, t->dtype)) continue;
    std::string message = "input " + std::to_string(i) + " '" +
                          (i < inputNames.size() ? inputNames[i] : "") + "' is " +
                          dataTypeName(t->dtype) + "; " + node.opType + "-" +
                          std::to_string(sig->sinceVersion) + " accepts " +
                          dtypeSetToString(c->allowed) + " (" + c->name + ")";
    // A dtype ONNX allows but kiln's kernel lacks is unsupported; any other is an invalid model.
    const bool onnxAllows = dtypeSetHas(c->onnxAllowed, t->dtype);
    if (onnxAllows && !c->note.empty()) message += ": " + c->note;
    failNode(node, message, onnxAllows ? ErrorCode::kUnsupportedNode : ErrorCode::kInvalidModel);
  }
}

}  // namespace kiln::ir
