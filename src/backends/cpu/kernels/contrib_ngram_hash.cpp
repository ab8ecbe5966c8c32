// CPU kernels of com.microsoft NGramHashMapping and VarlenNGramHashMapping (shape rules in
// ir/ops/contrib_ngram_hash.cpp). Each sequence (a batch row, or a packed request) is its L = N - 1
// ids of history (past_ids, else the fill id: eos_token_id when given, else pad_id) followed by its
// tokens. Token g's n-gram mixes the ids at g, g - 1, ..., g - n + 1, each times its multiplier
// (wrapping), by xor; an id before g's reset point reads as the fill id. The reset point is just
// after the latest EOS before g (reset_on_eos with eos_token_id) or the latest change of segment
// id at or before g (segment_ids; the history has the first token's segment unless
// past_segment_ids gives it), whichever is later. Each head's id is the mix modulo its vocabulary
// size (made non-negative), plus its head offset (wrapping). These are onnxruntime 1.32's
// semantics, established by comparing with its CPU kernel
// (tests/python/test_contrib_small_llm_ops.py).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

struct NGramParams {
  int64_t maxN, heads;
  int64_t pad;
  bool resetOnEos;
  int64_t capacity;  // VarlenNGramHashMapping's state_update_capacity
};

NGramParams ngramParams(const ir::Node& node) {
  return {ir::attrInt(node, "max_ngram_size"), ir::attrInt(node, "n_head_per_ngram"),
          ir::attrInt(node, "pad_id"), ir::attrInt(node, "reset_on_eos", 0) != 0,
          ir::attrInt(node, "state_update_capacity", 0)};
}

template <typename T>
T wrappingMultiply(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

template <typename T>
T wrappingAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}

/// What every sequence of one call shares.
template <typename T>
struct HashSetup {
  const T* multipliers;
  const T* vocab;
  const T* offsets;  // null: none
  int64_t maxN, heads;
  T fill, pad;
  bool hasEos;
  T eos;
  bool resetOnEos;
};

/// One sequence's view: its tokens and optional history, segments and outputs.
template <typename T>
struct Sequence {
  const T* ids;
  int64_t length;
  const T* past;                // L ids, or null
  const int32_t* segments;      // length ids, or null
  const int32_t* pastSegments;  // L ids, or null
  T* hashes;                    // length x (N - 1) H
  T* present;                   // L, or null
  int32_t* presentSegments;     // L, or null
  T* stateUpdate;               // capacity x L, or null
  int64_t captures;             // state_update rows to fill, <= capacity
};

template <typename T>
void hashSequence(const HashSetup<T>& s, const Sequence<T>& q, int64_t capacity) {
  const int64_t state = s.maxN - 1, total = state + q.length, outHeads = state * s.heads;
  std::vector<T> all(static_cast<size_t>(total));
  for (int64_t i = 0; i < state; ++i) all[i] = q.past ? q.past[i] : s.fill;
  std::copy(q.ids, q.ids + q.length, all.begin() + state);
  std::vector<int32_t> seg;
  if (q.segments) {
    seg.resize(static_cast<size_t>(total));
    const int32_t first = q.length ? q.segments[0] : 0;
    for (int64_t i = 0; i < state; ++i) seg[i] = q.pastSegments ? q.pastSegments[i] : first;
    std::copy(q.segments, q.segments + q.length, seg.begin() + state);
  }
  const bool eosResets = s.resetOnEos && s.hasEos;
  int64_t eosBound = 0, segBound = 0;
  for (int64_t g = 1; g < total; ++g) {
    if (eosResets && all[g - 1] == s.eos) eosBound = g;
    if (!seg.empty() && seg[g] != seg[g - 1]) segBound = g;
    if (g < state) continue;
    const int64_t bound = std::max(eosBound, segBound);
    T* out = q.hashes + (g - state) * outHeads;
    T mix = 0;
    for (int64_t k = 0; k < s.maxN; ++k) {
      const T id = g - k >= bound ? all[g - k] : s.fill;
      const T product = wrappingMultiply(id, s.multipliers[k]);
      mix = k == 0 ? product : static_cast<T>(mix ^ product);
      if (k == 0) continue;
      for (int64_t h = (k - 1) * s.heads; h < k * s.heads; ++h) {
        T r = static_cast<T>(mix % s.vocab[h]);
        if (r < 0) r = static_cast<T>(r + s.vocab[h]);
        out[h] = s.offsets ? wrappingAdd(r, s.offsets[h]) : r;
      }
    }
  }
  if (q.present) std::copy(all.end() - state, all.end(), q.present);
  if (q.presentSegments) std::copy(seg.end() - state, seg.end(), q.presentSegments);
  if (q.stateUpdate) {
    std::fill(q.stateUpdate, q.stateUpdate + capacity * state, s.pad);
    for (int64_t j = 0; j < q.captures; ++j)
      std::copy(all.begin() + j + 1, all.begin() + j + 1 + state, q.stateUpdate + j * state);
  }
}

/// The shared tables, after checking the values onnxruntime checks: every vocabulary size positive
/// and, where `offsetsNonNegative`, every head offset non-negative.
template <typename T>
HashSetup<T> hashSetup(KernelContext& ctx, const NGramParams& p, size_t offsetsInput,
                       size_t eosInput, bool offsetsNonNegative) {
  HashSetup<T> s{};
  s.multipliers = ctx.input(1).data<T>();
  s.vocab = ctx.input(2).data<T>();
  s.offsets = ctx.hasInput(offsetsInput) ? ctx.input(offsetsInput).data<T>() : nullptr;
  s.maxN = p.maxN;
  s.heads = p.heads;
  s.pad = static_cast<T>(p.pad);
  s.hasEos = ctx.hasInput(eosInput);
  s.eos = s.hasEos ? ctx.input(eosInput).data<T>()[0] : T(0);
  s.fill = s.hasEos ? s.eos : s.pad;
  s.resetOnEos = p.resetOnEos;
  const int64_t outHeads = (p.maxN - 1) * p.heads;
  for (int64_t h = 0; h < outHeads; ++h) {
    if (s.vocab[h] <= 0) {
      ctx.fail("vocab_sizes must be positive; entry " + std::to_string(h) + " is " +
                   std::to_string(s.vocab[h]),
               ErrorCode::kInvalidArgument);
    }
    if (offsetsNonNegative && s.offsets && s.offsets[h] < 0) {
      ctx.fail("head_offsets must be non-negative; entry " + std::to_string(h) + " is " +
                   std::to_string(s.offsets[h]),
               ErrorCode::kInvalidArgument);
    }
  }
  return s;
}

void ngramHashKernel(KernelContext& ctx, const NGramParams& p) {
  const Tensor& ids = ctx.input(0);
  const int64_t batch = ids.dim(0), length = ids.dim(1), state = p.maxN - 1;
  const int64_t outHeads = state * p.heads;
  Tensor& hashes = ctx.output(0);
  Tensor* present = ctx.wantsOutput(1) ? &ctx.output(1) : nullptr;
  dispatchInteger(ids.dtype(), "NGramHashMapping", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      const HashSetup<T> s = hashSetup<T>(ctx, p, 4, 5, true);
      const T* past = ctx.hasInput(3) ? ctx.input(3).template data<T>() : nullptr;
      const int32_t* seg = ctx.hasInput(6) ? ctx.input(6).template data<int32_t>() : nullptr;
      parallelForAtLeast(batch, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          const Sequence<T> q{ids.data<T>() + b * length,
                              length,
                              past ? past + b * state : nullptr,
                              seg ? seg + b * length : nullptr,
                              nullptr,
                              hashes.data<T>() + b * length * outHeads,
                              present ? present->data<T>() + b * state : nullptr,
                              nullptr,
                              nullptr,
                              0};
          hashSequence(s, q, 0);
        }
      });
    } else {
      ctx.fail("input_ids must be int32 or int64", ErrorCode::kUnsupportedNode);
    }
  });
}

/// cumulative_sequence_length starts at 0, grows strictly (every request holds a token) and ends
/// at total_tokens.
void checkOffsets(const KernelContext& ctx, const int32_t* cu, int64_t batch, int64_t tokens) {
  if (cu[0] != 0) {
    ctx.fail("cumulative_sequence_length[0] must be 0, got " + std::to_string(cu[0]),
             ErrorCode::kInvalidArgument);
  }
  for (int64_t i = 0; i < batch; ++i) {
    if (cu[i + 1] <= cu[i]) {
      ctx.fail("cumulative_sequence_length must grow strictly (every request holds a token); " +
                   std::string("entry ") + std::to_string(i + 1) + " is " +
                   std::to_string(cu[i + 1]) + " after " + std::to_string(cu[i]),
               ErrorCode::kInvalidArgument);
    }
  }
  if (cu[batch] != tokens) {
    ctx.fail("cumulative_sequence_length[" + std::to_string(batch) + "] is " +
                 std::to_string(cu[batch]) + ", not total_tokens " + std::to_string(tokens),
             ErrorCode::kInvalidArgument);
  }
}

void varlenNGramHashKernel(KernelContext& ctx, const NGramParams& p) {
  const Tensor& ids = ctx.input(0);
  const int32_t* cu = ctx.input(3).data<int32_t>();
  const int64_t batch = ctx.input(3).numel() - 1, state = p.maxN - 1;
  const int64_t outHeads = state * p.heads;
  checkOffsets(ctx, cu, batch, ids.numel());
  Tensor& hashes = ctx.output(0);
  Tensor* present = ctx.wantsOutput(1) ? &ctx.output(1) : nullptr;
  Tensor* presentSeg = ctx.wantsOutput(2) ? &ctx.output(2) : nullptr;
  Tensor* update = ctx.wantsOutput(3) ? &ctx.output(3) : nullptr;
  const int32_t* seg = ctx.hasInput(7) ? ctx.input(7).data<int32_t>() : nullptr;
  const int32_t* pastSeg = ctx.hasInput(8) ? ctx.input(8).data<int32_t>() : nullptr;
  const int32_t* captures = ctx.hasInput(9) ? ctx.input(9).data<int32_t>() : nullptr;
  dispatchInteger(ids.dtype(), "VarlenNGramHashMapping", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      const HashSetup<T> s = hashSetup<T>(ctx, p, 5, 6, false);
      const T* past = ctx.hasInput(4) ? ctx.input(4).template data<T>() : nullptr;
      parallelForAtLeast(batch, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t start = cu[i], length = cu[i + 1] - cu[i];
          const int64_t wanted = captures ? std::max<int64_t>(captures[i], 0) : 0;
          const Sequence<T> q{ids.data<T>() + start,
                              length,
                              past ? past + i * state : nullptr,
                              seg ? seg + start : nullptr,
                              pastSeg ? pastSeg + i * state : nullptr,
                              hashes.data<T>() + start * outHeads,
                              present ? present->data<T>() + i * state : nullptr,
                              presentSeg ? presentSeg->data<int32_t>() + i * state : nullptr,
                              update ? update->data<T>() + i * p.capacity * state : nullptr,
                              std::min({wanted, length, p.capacity})};
          hashSequence(s, q, p.capacity);
        }
      });
    } else {
      ctx.fail("input_ids must be int32 or int64", ErrorCode::kUnsupportedNode);
    }
  });
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "NGramHashMapping",
                                bindKernel(ngramParams, ngramHashKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "VarlenNGramHashMapping",
                                bindKernel(ngramParams, varlenNGramHashKernel));

}  // namespace kiln::cpu
