// The integer-GEMM candidates of kiln::QConv and kiln::QGemm (the QDQ fusion's layers, see
// ir/ops/quantized_fused.cpp): the QLinearConv / QLinearMatMul kernels (qgemm_ops.h) over these
// ops' input positions, with the fused Relu / Clip as output bounds and, without y_scale, a
// float32 output. They come before any_qconv_reference / any_qgemm_reference, which stay for
// what they decline (other activations, transA, weights computed at run time).
#include "backends/cpu/kernels/qgemm_op_support.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

bool present(const ir::Node& node, size_t input) {
  return input < node.inputs.size() && node.inputs[input] != ir::kNoValue;
}

int inputOrNone(const ir::Node& node, int input) {
  return present(node, static_cast<size_t>(input)) ? input : kNoInput;
}

// X, x_scale, x_zero_point, W, w_scale, w_zero_point, [y_scale, y_zero_point], [B].
QProductSignature qconvSignature(const ir::Node& node) {
  QProductSignature s;
  s.a = 0, s.aScale = 1, s.aZero = inputOrNone(node, 2);
  s.b = 3, s.bScale = 4, s.bZero = inputOrNone(node, 5);
  s.yScale = inputOrNone(node, 6), s.yZero = inputOrNone(node, 7);
  s.bias = inputOrNone(node, 8);
  s.act = fusedActivationOf(node);
  return s;
}

// A, a_scale, a_zero_point, B, b_scale, b_zero_point, [C], [y_scale, y_zero_point].
QProductSignature qgemmSignature(const ir::Node& node) {
  QProductSignature s;
  s.a = 0, s.aScale = 1, s.aZero = inputOrNone(node, 2);
  s.b = 3, s.bScale = 4, s.bZero = inputOrNone(node, 5);
  s.bias = inputOrNone(node, 6);
  s.yScale = inputOrNone(node, 7), s.yZero = inputOrNone(node, 8);
  s.transA = ir::attrInt(node, "transA", 0) != 0;
  s.transB = ir::attrInt(node, "transB", 0) != 0;
  s.alpha = ir::attrFloat(node, "alpha", 1.0f);
  s.act = fusedActivationOf(node);
  return s;
}

const bool kRegistered = [] {
  KernelRegistry& r = KernelRegistry::global();
  for (DataType dtype : {DataType::kUint8, DataType::kInt8}) {  // the activations' type
    const std::string a = qactivationsPrefix(dtype);
    for (KernelCandidate& c : qconvCandidates(a + "_qconv", qconvSignature))
      r.addCandidate("kiln", "QConv", dtype, std::move(c));
    for (CpuIsa isa : {CpuIsa::kAvx512Vnni, CpuIsa::kAvxVnni, CpuIsa::kAvx2}) {
      r.addCandidate("kiln", "QGemm", dtype, qmatmulCandidate(a + "_qgemm", isa, qgemmSignature));
      r.addCandidate("com.microsoft", "QGemm", dtype,
                     qmatmulCandidate(a + "_ms_qgemm", isa, qgemmSignature));
    }
  }
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
