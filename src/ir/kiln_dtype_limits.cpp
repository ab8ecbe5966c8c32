// Where kiln's kernels accept fewer dtypes than ONNX allows, and why (the "notes" of
// docs/operators.md). Each limit is what the kernel's dtype dispatch handles
// (src/backends/cpu/kernels/*.cpp), checked for every listed dtype by
// tests/python/test_operator_dtypes.py or the ONNX conformance suite.
#include "ir/type_constraints.h"

namespace kiln::ir {

namespace {

constexpr DTypeSet kF16 = dtypeBit(DataType::kFloat16);
constexpr DTypeSet kF32 = dtypeBit(DataType::kFloat32);
constexpr DTypeSet kF64 = dtypeBit(DataType::kFloat64);
constexpr DTypeSet kBF16 = dtypeBit(DataType::kBFloat16);
constexpr DTypeSet kFloats = kF16 | kF32 | kF64 | kBF16;  // dispatchFloat
constexpr DTypeSet kSigned = dtypeBit(DataType::kInt8) | dtypeBit(DataType::kInt16) |
                             dtypeBit(DataType::kInt32) | dtypeBit(DataType::kInt64);
constexpr DTypeSet kUnsigned = dtypeBit(DataType::kUint8) | dtypeBit(DataType::kUint16) |
                               dtypeBit(DataType::kUint32) | dtypeBit(DataType::kUint64);
constexpr DTypeSet kNumeric = kFloats | kSigned | kUnsigned;  // dispatchNumeric
constexpr DTypeSet kBool = dtypeBit(DataType::kBool);
constexpr DTypeSet kAny = ~DTypeSet{0};

}  // namespace

const DTypeLimit kDTypeLimits[] = {
    // Kernels that handle fewer dtypes than ONNX allows.
    {"", "IsNaN", "T1", kFloats,
     "float8 inputs not implemented (the kernel tests float16/32/64 and bfloat16)"},
    {"", "IsInf", "T1", kFloats,
     "float8 inputs not implemented (the kernel tests float16/32/64 and bfloat16)"},
    {"", "NonZero", "T", kNumeric | kBool, "strings not implemented"},
    {"", "Pad", "T", kAny & ~dtypeBit(DataType::kFloat8E8M0),
     "float8_e8m0fnu has no zero to pad with; kiln's padding differs from ONNX's reference"},
    {"", "Resize", "T1", kNumeric,
     "bool and string not implemented (the kernel interpolates numbers)"},
    {"", "Upsample", "T", kNumeric,
     "bool and string not implemented (the kernel interpolates numbers)"},
    {"", "Col2Im", "T", kNumeric, "bool and string not implemented"},
    {"", "GridSample", "T1", kFloats,
     "integer, bool and string inputs not implemented (the kernel samples floats)"},
    // Notes on dtypes that work with a caveat.
    {"", "Erf", "T", kAny, "float64 is computed in float32 precision (relative error ~3e-8)"},
    {"", "Gelu", "T", kAny, "float64 is computed in float32 precision (relative error ~3e-8)"},
    // Its quantized dtypes (float8 since ONNX 21) are being extended with QuantizeLinear's.
    {"", "QLinearMatMul", "*", 0,
     "not checked at build time: the kernel reports unsupported quantized dtypes"},
    // Ops whose dtypes are not checked at build time: their values may be sequences or optionals,
    // or their dtype handling is being extended (the float8/int4/int2/float4 casts).
    {"", "If", "*", 0, "not checked: branches may return any tensor, sequence or optional"},
    {"", "Loop", "*", 0,
     "not checked: loop-carried values may be any tensor, sequence or optional"},
    {"", "Scan", "*", 0, "not checked: scan values may be any tensor type"},
    {"", "Cast", "*", 0,
     "not checked at build time: the cast kernel reports pairs it cannot convert"},
    {"", "CastLike", "*", 0,
     "not checked at build time: the cast kernel reports pairs it cannot convert"},
    {"", "QuantizeLinear", "*", 0,
     "not checked at build time: the kernel reports unsupported dtypes"},
    {"", "DequantizeLinear", "*", 0,
     "not checked at build time: the kernel reports unsupported dtypes"},
    {"", "SequenceAt", "*", 0, "not checked: sequence op"},
    {"", "SequenceConstruct", "*", 0, "not checked: sequence op"},
    {"", "SequenceEmpty", "*", 0, "not checked: sequence op"},
    {"", "SequenceErase", "*", 0, "not checked: sequence op"},
    {"", "SequenceInsert", "*", 0, "not checked: sequence op"},
    {"", "SequenceLength", "*", 0, "not checked: sequence op"},
    {"", "SequenceMap", "*", 0, "not checked: sequence op"},
    {"", "SplitToSequence", "*", 0, "not checked: sequence op"},
    {"", "ConcatFromSequence", "*", 0, "not checked: sequence op"},
    {"", "Optional", "*", 0, "not checked: optional op"},
    {"", "OptionalGetElement", "*", 0, "not checked: optional op"},
    {"", "OptionalHasElement", "*", 0, "not checked: optional op"},
    // ONNX Runtime's contrib operators have no ONNX schema: their shape rules check the dtypes,
    // listed here for docs/operators.md (kiln's and onnxruntime's CPU dtypes).
    {"", "SimplifiedLayerNormalization", "*", 0,
     "onnxruntime's op (its ONNX-domain registration): X, scale float32 (onnxruntime: float16, "
     "float32, float64)"},
    {"com.microsoft", "Attention", "*", 0,
     "float32 or float16, mask_index int32 (onnxruntime: float32; float16 through the Casts its "
     "session inserts); past / present; no do_rotary (nor in onnxruntime's CPU kernel), no "
     "past_present_share_buffer"},
    {"com.microsoft", "BiasAdd", "*", 0, "float32 (onnxruntime: CUDA only)"},
    {"com.microsoft", "BiasGelu", "*", 0, "float32 (onnxruntime: float32)"},
    {"com.microsoft", "DecoderMaskedMultiHeadAttention", "*", 0,
     "float32 or float16, mask_index, past_sequence_length, beam_width, cache_indirection int32 "
     "(onnxruntime: float32; float16 through inserted Casts); no packed QKV"},
    {"com.microsoft", "DequantizeLinear", "*", 0,
     "as ONNX DequantizeLinear-21 (onnxruntime: int8, uint8, int16, uint16, int32, int4, uint4)"},
    {"com.microsoft", "DynamicQuantizeLSTM", "*", 0,
     "X float32; W, R int8 or uint8 (onnxruntime: the same)"},
    {"com.microsoft", "DynamicQuantizeMatMul", "*", 0,
     "A float32; B int8 or uint8 (onnxruntime: the same)"},
    {"com.microsoft", "EmbedLayerNormalization", "*", 0,
     "ids and mask int32, embeddings float32 (onnxruntime: the same)"},
    {"com.microsoft", "FastGelu", "*", 0, "float32 (onnxruntime: float32)"},
    {"com.microsoft", "FusedConv", "*", 0,
     "float32 (onnxruntime: float32); activation Tanh not supported"},
    {"com.microsoft", "GatherBlockQuantized", "*", 0,
     "data uint8 (bits 2, 4, 8), float32 scales (onnxruntime: also int4, uint4, float8, float4 "
     "data, float16 scales)"},
    {"com.microsoft", "GatherPacked", "*", 0,
     "data uint8 of GGML F32, F16, BF16, Q4_0, Q5_0, Q8_0, IQ4_NL, Q5_K, Q6_K or IQ4_XS rows, "
     "indices int32 or int64, output float32, float16 or bfloat16 (onnxruntime: the same); "
     "IQ2_XXS, IQ2_XS, IQ3_XXS and IQ2_S refused (GGML lattice grids; onnxruntime runs them)"},
    {"com.microsoft", "Gelu", "*", 0, "float32 (onnxruntime: float32)"},
    {"com.microsoft", "FusedGemm", "*", 0,
     "float32 (onnxruntime: float32); activation Relu, LeakyRelu, Sigmoid or HardSigmoid"},
    {"com.microsoft", "GroupQueryAttention", "*", 0,
     "float32 or float16, seqlens_k and total_sequence_length int32, position_ids int64 "
     "(onnxruntime: the same, and int8 / uint8 quantized caches); no k_scale / v_scale, "
     "q_norm_weight / k_norm_weight, query_seqlens, sliding_window_cache"},
    {"com.microsoft", "FusedMatMul", "*", 0,
     "float32 (onnxruntime: float32, float64); transBatchA / transBatchB not supported"},
    {"com.microsoft", "MatMulBnb4", "*", 0,
     "A, absmax float32, B uint8, FP4 or NF4 (onnxruntime: the same); transB 0 is A x W, which "
     "onnxruntime's kernel does not compute"},
    {"com.microsoft", "MatMulFpQ4", "*", 0,
     "A float32, B uint8, B_shape a constant int64 (onnxruntime: the same); blk_quant_type 0 or "
     "any other value for 1, as onnxruntime reads it"},
    {"com.microsoft", "MatMulInteger16", "*", 0, "A, B int16, Y int32 (onnxruntime: the same)"},
    {"com.microsoft", "MatMulNBits", "*", 0,
     "A float32, B uint8 (2, 4 or 8 bits), zero points uint8 or float32 (onnxruntime: A float32 or "
     "float16); no g_idx"},
    {"com.microsoft", "MoE", "*", 0,
     "float32 (onnxruntime: float32); swiglu with swiglu_fusion 0, 1 or 2 (onnxruntime: 1 only)"},
    {"com.microsoft", "MRotaryEmbedding", "*", 0,
     "float32 or float16, position_ids int64 (onnxruntime: the same); is_packed_batching not "
     "supported"},
    {"com.microsoft", "MultiHeadAttention", "*", 0,
     "float32 or float16, key_padding_mask int32 (onnxruntime: float32; float16 through inserted "
     "Casts); past / present, 4-D key and value, qk; no packed forms (nor in onnxruntime's CPU "
     "kernel), past_sequence_length or cache_indirection"},
    {"com.microsoft", "QMoE", "*", 0,
     "float32 or float16, uint8 weights of 2, 4 or 8 bits, quant_type int (onnxruntime: also "
     "bfloat16, 3 bits, fp4 and fp8)"},
    {"com.microsoft", "QEmbedLayerNormalization", "*", 0,
     "ids and mask int32, tables int8 or uint8, float32 scales (onnxruntime: the same)"},
    {"com.microsoft", "QLinearAveragePool", "*", 0,
     "int8 or uint8, channels_last 0 (onnxruntime: the same, also channels_last 1)"},
    {"com.microsoft", "QLinearConcat", "*", 0, "int8 or uint8 (onnxruntime: the same)"},
    {"com.microsoft", "QLinearLeakyRelu", "*", 0, "int8 or uint8 (onnxruntime: the same)"},
    {"com.microsoft", "QLinearSigmoid", "*", 0, "int8 or uint8 (onnxruntime: the same)"},
    {"com.microsoft", "QLinearSoftmax", "*", 0, "int8 or uint8 (onnxruntime: the same)"},
    {"com.microsoft", "QLinearWhere", "*", 0, "int8 or uint8 (onnxruntime: the same)"},
    {"com.microsoft", "RotaryEmbedding", "*", 0,
     "float32, position_ids int64 (onnxruntime: float32, float16); is_packed_batching not "
     "supported"},
    {"com.microsoft", "MatMulIntegerToFloat", "*", 0,
     "A, B int8 or uint8, float32 scales and output (onnxruntime: the same, without int8 A x uint8 "
     "B)"},
    {"com.microsoft", "NhwcMaxPool", "*", 0, "int8 or uint8 (onnxruntime: the same)"},
    {"com.microsoft", "QAttention", "*", 0,
     "input, weight int8 or uint8 (compared with onnxruntime for uint8 input), float32 scales and "
     "output; no past / present"},
    {"com.microsoft", "QGemm", "*", 0,
     "A, B int8 or uint8, C int32, float32 or 8-bit output (onnxruntime: the same)"},
    {"com.microsoft", "QLinearAdd", "*", 0, "int8 or uint8 (onnxruntime: the same)"},
    {"com.microsoft", "QLinearGlobalAveragePool", "*", 0,
     "int8 or uint8, channels_last 0 or 1 (onnxruntime: the same)"},
    {"com.microsoft", "QLinearMul", "*", 0, "int8 or uint8 (onnxruntime: the same)"},
    {"com.microsoft", "QLinearConv", "*", 0,
     "as ONNX QLinearConv, channels_last 0 (onnxruntime: int8, uint8, also channels_last 1)"},
    {"com.microsoft", "QuantizeLinear", "*", 0,
     "as ONNX QuantizeLinear-21 (onnxruntime: int8, uint8, int16, uint16, int4, uint4)"},
    {"com.microsoft", "QuickGelu", "*", 0, "float32 (onnxruntime: float32)"},
    {"com.microsoft", "SparseAttention", "*", 0,
     "float32 or float16, block indices and lengths int32 (onnxruntime: the same; it runs only "
     "with past and present bound to one buffer, kiln writes the present as a new tensor)"},
    {"com.microsoft", "SkipLayerNormalization", "*", 0,
     "float32 (onnxruntime: float32, float64, float16)"},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", "*", 0,
     "float32 (onnxruntime: float32, float64, float16)"},
    {"com.microsoft", "TransposeMatMul", "*", 0, "float32 (onnxruntime: float32)"},
    {"com.microsoft", "AttnLSTM", "*", 0,
     "float32, sequence lengths int32 (onnxruntime: float32; float64 registered but not "
     "implemented)"},
    // Token and sequence ops (ir/ops/contrib_sequence_ops.cpp).
    {"com.microsoft", "BifurcationDetector", "*", 0, "int64 (onnxruntime: the same)"},
    {"com.microsoft", "DynamicTimeWarping", "*", 0,
     "input float32, output int32 (onnxruntime: the same)"},
    {"com.microsoft", "NGramRepeatBlock", "*", 0,
     "input_ids int64, scores float32 (onnxruntime: the same)"},
    {"com.microsoft", "Tokenizer", "*", 0,
     "string; expressions in RE2 syntax, leftmost-longest, as onnxruntime"},
    {"com.microsoft", "WordConvEmbedding", "*", 0,
     "Sequence int32 [words, chars] (onnxruntime: also higher ranks, of which it reads dims 0 and "
     "1), weights float32; an empty word's row is 0 (onnxruntime: unset)"},
    // Small self-contained ops (ir/ops/contrib_misc.cpp).
    {"com.microsoft", "CDist", "*", 0,
     "float32, float64; metric sqeuclidean or euclidean (onnxruntime: the same)"},
    {"com.microsoft", "CropAndResize", "*", 0,
     "X, rois float32, batch_indices and crop_size int32 (onnxruntime: the same)"},
    {"com.microsoft", "Inverse", "*", 0, "float16, float32, float64 (onnxruntime: the same)"},
    {"com.microsoft", "MaxpoolWithMask", "*", 0,
     "X float32, M int32, 1 to 3 spatial dims (onnxruntime: the same)"},
    {"com.microsoft", "MurmurHash3", "*", 0,
     "X int32, uint32, int64, uint64, float32, float64 or string; Y uint32 (positive 1) or int32 "
     "(onnxruntime: the same)"},
    {"com.microsoft", "SampleOp", "*", 0, "any (onnxruntime: float32)"},
    // The ONNX ops under com.microsoft (ir/ops/contrib_onnx_equivalents.cpp).
    {"com.microsoft", "ConvTransposeWithDynamicPads", "*", 0,
     "as ONNX ConvTranspose-11 with the Pads input required, auto_pad NOTSET (onnxruntime: "
     "float32, Pads required)"},
    {"com.microsoft", "ExpandDims", "*", 0,
     "as ONNX Unsqueeze, axis an int32 scalar (onnxruntime: every numeric type, bool, string)"},
    {"com.microsoft", "GatherND", "*", 0,
     "as ONNX GatherND-11, indices int32 or int64 (onnxruntime: every numeric type, bool, "
     "string)"},
    {"com.microsoft", "GridSample", "*", 0,
     "as ONNX GridSample-16 with torch's bicubic padding, float16..float64 (onnxruntime: "
     "float32)"},
    {"com.microsoft", "Pad", "*", 0,
     "as ONNX Pad-11, pads [2 * rank] or [1, 2 * rank] (onnxruntime: float32)"},
    {"com.microsoft", "Range", "*", 0,
     "float32, float64, int16, int32, int64, delta optional (onnxruntime: the same)"},
    {"com.microsoft", "Trilu", "*", 0, "as ONNX Trilu (onnxruntime: float32, float64, int64)"},
    {"com.microsoft", "Unique", "*", 0,
     "1-D x of any type, first-occurrence order (onnxruntime: float32); NaNs are one value "
     "(onnxruntime: each NaN its own)"},
    // Recent LLM architectures (ir/ops/contrib_llm_norms.cpp).
    {"com.microsoft", "ScaledSiLU", "*", 0,
     "float32, float16, bfloat16; scale any of the three (onnxruntime: the same)"},
    {"com.microsoft", "GatedAdd", "*", 0,
     "float32, float16 (onnxruntime: the same); no gate_weight (onnxruntime: CUDA only)"},
    {"com.microsoft", "GatedRMSNorm", "*", 0, "float32, float16, bfloat16 (onnxruntime: the same)"},
    {"com.microsoft", "BranchwiseRMSNorm", "*", 0,
     "float32, float16, bfloat16; scale any of the three (onnxruntime: the same)"},
    {"com.microsoft", "HyperConnectionPreMix", "*", 0,
     "float32, float16, bfloat16; pre_mix any of the three (onnxruntime: the same)"},
    {"com.microsoft", "HyperConnectionPostMix", "*", 0,
     "float32, float16, bfloat16; post_mix, stream_mix any of the three (onnxruntime: the same)"},
    {"com.microsoft", "EngramGate", "*", 0, "float32, float16 (onnxruntime: the same)"},
    {"com.microsoft", "CausalConvWithState", "*", 0,
     "float32, float16 (onnxruntime: the same); ndim 1 only, no state_window, state_length, "
     "input_channel_offset, input_channels, state_channels_last, state_update_capacity nor "
     "state_update (onnxruntime: CUDA only)"},
    {"com.microsoft", "VarlenCausalConvWithState", "*", 0,
     "float32, float16, bfloat16, offsets and capture_count int32 (onnxruntime: the same); no "
     "kernel_delta / previous_mask mode (onnxruntime: CUDA only)"},
    {"com.microsoft", "LinearAttention", "*", 0,
     "float32, float16, bfloat16, past_state any of the three; state_window 0 (onnxruntime: "
     "float32, float16 through inserted Casts; state_window > 0 CUDA only)"},
    {"com.microsoft", "GatedDeltaNet", "*", 0,
     "float32, float16, bfloat16; decay and beta float32 or the query's type; the state, a_log, "
     "dt_bias and state_update float32 (onnxruntime: the same)"},
    {"com.microsoft", "UnfoldTensor", "*", 0,
     "every type (onnxruntime: registers every type, runs float32, float64, int32, int64)"},
    // ir/ops/contrib_llm_gates.cpp and contrib_ngram_hash.cpp.
    {"com.microsoft", "LinearAttentionGate", "*", 0,
     "a, b float32, float16, bfloat16; dt_bias, decay_scale float32 (onnxruntime: the same)"},
    {"com.microsoft", "MoEGroupRouter", "*", 0,
     "logits float32, float16, bfloat16; expert_bias float32 (onnxruntime: the same)"},
    {"com.microsoft", "NGramHashMapping", "*", 0,
     "ids int32, int64; segment_ids int32 (onnxruntime: the same)"},
    {"com.microsoft", "VarlenNGramHashMapping", "*", 0,
     "ids int32, int64; offsets, segments, capture counts int32 (onnxruntime: the same)"},
    // onnxruntime's blocked layout (ir/ops/contrib_nchwc.h): blocks of this CPU's size.
    {"com.microsoft.nchwc", "Conv", "*", 0,
     "float32 (onnxruntime: float32); W reordered for the CPU's block size (16 with AVX-512F, "
     "else 8)"},
    {"com.microsoft.nchwc", "ReorderInput", "*", 0,
     "float32, any channel count (onnxruntime: float32, channels a multiple of 4)"},
    {"com.microsoft.nchwc", "ReorderOutput", "*", 0, "float32 (onnxruntime: float32)"},
    {"com.microsoft.nchwc", "MaxPool", "*", 0, "float32 (onnxruntime: float32)"},
    {"com.microsoft.nchwc", "AveragePool", "*", 0, "float32 (onnxruntime: float32)"},
    {"com.microsoft.nchwc", "GlobalMaxPool", "*", 0, "float32 (onnxruntime: float32)"},
    {"com.microsoft.nchwc", "GlobalAveragePool", "*", 0, "float32 (onnxruntime: float32)"},
    {"com.microsoft.nchwc", "Upsample", "*", 0,
     "float32, nearest or linear (onnxruntime: the same)"},
};

const size_t kDTypeLimitCount = sizeof(kDTypeLimits) / sizeof(kDTypeLimits[0]);

}  // namespace kiln::ir
