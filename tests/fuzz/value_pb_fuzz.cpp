// Fuzz target: ONNX test-data files (input_N.pb: a TensorProto, SequenceProto or OptionalProto), as
// `kiln run --input x=FILE.pb` reads them. The first byte says what the model expects (the element
// type, and whether a sequence or an optional); the rest is the file.
#include <string>

#include "fuzz_support.h"
#include "onnx/value_proto.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::setUpFuzzing();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::ByteReader in(data, size);
  const uint8_t kind = in.u8();
  kiln::onnx_import::ValueType expected;
  expected.dtype =
      static_cast<kiln::DataType>((kind & 0x1f) % 27);  // 0 (any), or a type kiln knows
  expected.isSequence = kind & 0x20;
  expected.isOptional = kind & 0x40;
  const std::string bytes(reinterpret_cast<const char*>(in.rest()), in.remaining());
  kiln::fuzz::refusedOnlyByKilnErrors(
      [&] { kiln::onnx_import::readValueBytes(bytes, "<fuzz>.pb", expected, "input 'x'"); });
  return 0;
}
