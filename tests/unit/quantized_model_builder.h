// Integer initializers and Q / DQ nodes for small hand-built QDQ models (with model_builder.h).
#pragma once
#include <string>
#include <vector>

#include "model_builder.h"

namespace kiln::testing {

/// An int8, uint8 or int32 initializer (onnx keeps all three in int32_data).
inline onnx::TensorProto* addIntInitializer(onnx::ModelProto& model, const std::string& name,
                                            int elemType, const std::vector<int64_t>& dims,
                                            const std::vector<int32_t>& values) {
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(elemType);
  for (int64_t d : dims) t->add_dims(d);
  for (int32_t v : values) t->add_int32_data(v);
  return t;
}

/// A per-tensor scale and zero point named <prefix>_scale and <prefix>_zp.
inline void addQuantParams(onnx::ModelProto& model, const std::string& prefix, float scale,
                           int elemType, int32_t zeroPoint) {
  addFloatInitializer(model, prefix + "_scale", {}, {scale});
  addIntInitializer(model, prefix + "_zp", elemType, {}, {zeroPoint});
}

/// DequantizeLinear(q, <params>_scale, <params>_zp) -> out, with the attribute axis when >= 0.
inline void addDequantize(onnx::ModelProto& model, const std::string& q, const std::string& params,
                          const std::string& out, const std::string& name = "", int64_t axis = -1) {
  addNode(model, "DequantizeLinear", {q, params + "_scale", params + "_zp"}, {out},
          name.empty() ? "dq_" + out : name);
  if (axis >= 0) setInt(lastNode(model), "axis", axis);
}

/// QuantizeLinear(x, <params>_scale, <params>_zp) -> out.
inline void addQuantize(onnx::ModelProto& model, const std::string& x, const std::string& params,
                        const std::string& out, const std::string& name = "") {
  addNode(model, "QuantizeLinear", {x, params + "_scale", params + "_zp"}, {out},
          name.empty() ? "q_" + out : name);
}

}  // namespace kiln::testing
