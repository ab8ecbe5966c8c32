// CPU kernels of com.microsoft MatMulBnb4 and MatMulFpQ4 (ir/ops/contrib_weight_only_matmul.cpp):
// the 4-bit weights dequantized to a float32 matrix for the MatMul kernel
// (contrib_dequantized_matmul.h), as MatMulNBits does.
#include <cstring>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/contrib_dequantized_matmul.h"

namespace kiln::cpu {
namespace {

// The 16 values of bitsandbytes' 4-bit codes, scaled by a block's absmax: FP4 (1 sign bit, 2
// exponent bits, 1 mantissa bit, divided by its largest magnitude 12) and NF4 (the quantiles of a
// normal distribution on [-1, 1]).
constexpr float kFp4Values[16] = {
    0.0f,  5.208333333e-03f,  0.66666667f,  1.0f,  0.33333333f,  0.5f,  0.16666667f,  0.25f,
    -0.0f, -5.208333333e-03f, -0.66666667f, -1.0f, -0.33333333f, -0.5f, -0.16666667f, -0.25f};
constexpr float kNf4Values[16] = {-1.0f,
                                  -0.6961928009986877f,
                                  -0.5250730514526367f,
                                  -0.39491748809814453f,
                                  -0.28444138169288635f,
                                  -0.18477343022823334f,
                                  -0.09105003625154495f,
                                  0.0f,
                                  0.07958029955625534f,
                                  0.16093020141124725f,
                                  0.24611230194568634f,
                                  0.33791524171829224f,
                                  0.44070982933044434f,
                                  0.5626170039176941f,
                                  0.7229568362236023f,
                                  1.0f};

struct Bnb4Layout {
  int64_t K = 0, N = 0, blockSize = 0;
  bool nf4 = false, transB = true;
};

// The matrix the product multiplies by: W^T [K, N] (transB) or W [N, K], W [N, K] being B's
// values in order (element e in the high nibble of byte e / 2 when e is even) times its block's
// absmax.
Tensor dequantizeBnb4(const ir::Node& node, const Bnb4Layout& l, const Tensor& b,
                      const Tensor& absmax) {
  const int64_t numel = l.N * l.K;
  // Rounded up without adding first: N x K may be as large as int64 holds.
  const int64_t blocks = numel / l.blockSize + (numel % l.blockSize != 0);
  const int64_t bytes = numel / 2 + numel % 2;
  if (b.numel() != bytes || absmax.numel() != blocks) {
    ir::failNode(node,
                 "B " + b.describe() + " must hold (N x K + 1) / 2 = " + std::to_string(bytes) +
                     " bytes and absmax " + absmax.describe() +
                     " ceil(N x K / block_size) = " + std::to_string(blocks) + " values",
                 ErrorCode::kInvalidArgument);
  }
  const float* values = l.nf4 ? kNf4Values : kFp4Values;
  const uint8_t* q = b.data<uint8_t>();
  const float* scale = absmax.data<float>();
  Tensor w(DataType::kFloat32, l.transB ? Shape{l.K, l.N} : Shape{l.N, l.K});
  float* out = w.data<float>();
  for (int64_t n = 0; n < l.N; ++n) {
    for (int64_t k = 0; k < l.K; ++k) {
      const int64_t e = n * l.K + k;
      const int code = (e % 2 == 0) ? q[e / 2] >> 4 : q[e / 2] & 0xF;
      out[l.transB ? k * l.N + n : e] = values[code] * scale[e / l.blockSize];
    }
  }
  return w;
}

KernelFn makeMatMulBnb4Kernel(const KernelCreateInfo& info) {
  Bnb4Layout l;
  l.K = ir::attrInt(info.node, "K");
  l.N = ir::attrInt(info.node, "N");
  l.blockSize = ir::attrInt(info.node, "block_size");
  l.nf4 = ir::attrInt(info.node, "quant_type") == 1;
  l.transB = ir::attrInt(info.node, "transB", 1) != 0;
  DequantizedMatMul spec;
  spec.weightInputs = {1, 2};
  spec.K = l.transB ? l.K : l.N;
  spec.N = l.transB ? l.N : l.K;
  spec.dequantize = [l](const ir::Node& label, const std::vector<const Tensor*>& w) {
    return dequantizeBnb4(label, l, *w[0], *w[1]);
  };
  return makeDequantizedMatMul(info, std::move(spec));
}

struct FpQ4Layout {
  int64_t K = 0, N = 0;
  bool zeroPoints = true;  // blk_quant_type other than 0: a uint8 zero point after each scale
};

constexpr int64_t kFpQ4Block = 32;

// W [K, N] of MLAS's Q4 blob: for each column n, for each block of 32 rows along K, a float
// scale, (a zero point,) and 16 bytes: byte j holds row j (low nibble) and row j + 16 (high).
Tensor dequantizeFpQ4(const ir::Node& node, const FpQ4Layout& l, const Tensor& b) {
  const int64_t blobBytes = l.zeroPoints ? 21 : 20;
  const int64_t blocks = l.K / kFpQ4Block + (l.K % kFpQ4Block != 0);
  if (b.numel() != l.N * blocks * blobBytes) {
    ir::failNode(node,
                 "B " + b.describe() + " must hold N x ceil(K / 32) x " +
                     std::to_string(blobBytes) + " = " + std::to_string(l.N * blocks * blobBytes) +
                     " bytes",
                 ErrorCode::kInvalidArgument);
  }
  Tensor w(DataType::kFloat32, Shape{l.K, l.N});
  float* out = w.data<float>();
  const uint8_t* blob = b.data<uint8_t>();
  for (int64_t n = 0; n < l.N; ++n) {
    for (int64_t kb = 0; kb < blocks; ++kb, blob += blobBytes) {
      float scale;
      std::memcpy(&scale, blob, sizeof scale);
      const int zero = l.zeroPoints ? blob[4] : 8;
      const uint8_t* q = blob + (l.zeroPoints ? 5 : 4);
      for (int64_t j = 0; j < kFpQ4Block && kb * kFpQ4Block + j < l.K; ++j) {
        const int code = j < 16 ? q[j] & 0xF : q[j - 16] >> 4;
        out[(kb * kFpQ4Block + j) * l.N + n] = static_cast<float>(code - zero) * scale;
      }
    }
  }
  return w;
}

KernelFn makeMatMulFpQ4Kernel(const KernelCreateInfo& info) {
  const Tensor* bShape = info.constants.size() > 2 ? info.constants[2] : nullptr;
  if (!bShape || bShape->numel() != 2 || bShape->dtype() != DataType::kInt64)
    ir::failNode(info.node, "B_shape must be a constant int64 [K, N]", ErrorCode::kUnsupportedNode);
  FpQ4Layout l;
  l.K = bShape->data<int64_t>()[0];
  l.N = bShape->data<int64_t>()[1];
  l.zeroPoints = ir::attrInt(info.node, "blk_quant_type", 1) != 0;
  DequantizedMatMul spec;
  spec.weightInputs = {1};
  spec.K = l.K;
  spec.N = l.N;
  spec.dequantize = [l](const ir::Node& label, const std::vector<const Tensor*>& w) {
    return dequantizeFpQ4(label, l, *w[0]);
  };
  return makeDequantizedMatMul(info, std::move(spec));
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MatMulBnb4", KernelFactory(makeMatMulBnb4Kernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MatMulFpQ4", KernelFactory(makeMatMulFpQ4Kernel));

}  // namespace kiln::cpu
