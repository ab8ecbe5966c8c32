#include "core/bool_bytes.h"

namespace kiln {

Tensor boolsFromBytes(Shape shape, const uint8_t* bytes) {
  Tensor t(DataType::kBool, std::move(shape));
  bool* out = t.data<bool>();
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = bytes[i] != 0;
  return t;
}

}  // namespace kiln
