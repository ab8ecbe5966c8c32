// The 8-bit GEMM driver: the activation operand is packed per call in blocks of strips sized to
// stay in L2 (half of it; the weights' strip, in L1, and C stream through the rest), and each
// weights strip meets every activation strip of the block in turn (the BLIS loop order, with the
// constant operand outermost). Blocks, and when there are fewer blocks than threads also ranges of
// weights strips, are the units of work spread over the thread pool; each thread packs into its
// own slot of the workspace.
//
// Zero points (qgemm.h: C = (L - zL)(R - zR)) with W the weights and A the activations, sW / sA
// their sums over K: W·A - zW·sA - zA·sW + K·zW·zA, so that
//   per weights row/column w: wAdd = bias - zA·sW (zA one value), or the product sW · (-zA[a]);
//   per activation a: aAdd = -zW·(sA - K·zA) (zW one value), or the product (-zW[w]) · (sA - K·zA).
#include "backends/cpu/qgemm/qgemm.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_caches.h"
#include "backends/cpu/qgemm/qgemm_epilogue.h"
#include "backends/cpu/qgemm/qgemm_kernels.h"
#include "backends/cpu/qgemm/qgemm_pack.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"

namespace kiln::cpu {
namespace {

constexpr uint64_t kAlign = 64;
constexpr int64_t kMaxTile = 8 * 32;  // mr x nr of the widest kernel

uint64_t roundUp(uint64_t n, uint64_t step) { return (n + step - 1) / step * step; }

int64_t stripWidth(const QGemmKernelInfo& ki, QSide side) {
  return side == QSide::kLeft ? ki.mr : ki.nr;
}
QSide otherSide(QSide side) { return side == QSide::kLeft ? QSide::kRight : QSide::kLeft; }

uint64_t packedBytes(QSide side, CpuIsa isa, int64_t outer, int64_t depth) {
  const int64_t w = stripWidth(qgemmKernelFor(isa), side);
  return static_cast<uint64_t>(qStrips(outer, w) * qStripBytes(depth, w));
}

// Whether vpmaddubsw cannot saturate on these stored weights (PackedQMatrix::maddubsSafe): the
// pairs it adds are bytes 2j and 2j + 1 of the packed layout.
bool pairsFitInt16(const int8_t* w, uint64_t n) {
  for (uint64_t i = 0; i + 1 < n; i += 2) {
    const int positive = std::max<int>(w[i], 0) + std::max<int>(w[i + 1], 0);
    const int negative = std::min<int>(w[i], 0) + std::min<int>(w[i + 1], 0);
    if (positive > 128 || negative < -128) return false;
  }
  return true;
}

int32_t wrap(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}

// How a problem is cut into work: blocks of activation strips, each split into `parts` ranges of
// weights strips; `slots` threads, each with slotBytes of workspace.
struct Layout {
  const QGemmKernelInfo* ki;
  QSide weightsSide;
  int64_t weightOuter, actOuter, weightWidth, actWidth;
  int64_t weightStrips, actStrips, blockStrips, blocks, parts, items, slots;
  uint64_t blockPackedBytes, slotBytes, globalBytes;
};

Layout layoutOf(QSide weightsSide, CpuIsa isa, int64_t M, int64_t N, int64_t K, int threads) {
  Layout l;
  l.ki = &qgemmKernelFor(isa);
  l.weightsSide = weightsSide;
  const bool left = weightsSide == QSide::kLeft;
  l.weightOuter = left ? M : N;
  l.actOuter = left ? N : M;
  l.weightWidth = stripWidth(*l.ki, weightsSide);
  l.actWidth = stripWidth(*l.ki, otherSide(weightsSide));
  l.weightStrips = qStrips(l.weightOuter, l.weightWidth);
  l.actStrips = qStrips(l.actOuter, l.actWidth);
  const int64_t stripBytes = std::max<int64_t>(qStripBytes(K, l.actWidth), 1);
  const int64_t t = std::max(threads, 1);
  l.blockStrips = std::clamp<int64_t>(cpuCacheSizes().l2Bytes / 2 / stripBytes, 1,
                                      std::max<int64_t>((l.actStrips + t - 1) / t, 1));
  l.blocks = qStrips(l.actStrips, l.blockStrips);
  l.parts = l.blocks >= t ? 1
                          : std::clamp<int64_t>((t + l.blocks - 1) / l.blocks, 1,
                                                std::max<int64_t>(l.weightStrips, 1));
  l.items = l.blocks * l.parts;
  l.slots = std::min<int64_t>(t, l.items);
  l.blockPackedBytes = roundUp(static_cast<uint64_t>(l.blockStrips * stripBytes), kAlign);
  const uint64_t blockInts = static_cast<uint64_t>(l.blockStrips * l.actWidth);
  l.slotBytes = l.blockPackedBytes + 3 * roundUp(blockInts * sizeof(int32_t), kAlign);
  l.globalBytes =
      roundUp(static_cast<uint64_t>(2 * l.weightOuter + l.actOuter) * sizeof(int32_t), kAlign);
  return l;
}

// A zero point of one value or one per index; all zero when absent. Zero points that are all 0
// (a quantizer's per-channel zeros) are dropped, so that the tiles skip their terms.
struct ZeroPoints {
  ZeroPoints(const int32_t* v, int64_t n) : values(v), count(n) {
    if (!anyNonZero()) values = nullptr, count = 1;
  }
  const int32_t* values = nullptr;
  int64_t count = 1;
  bool perIndex() const { return values && count > 1; }
  int32_t scalar() const { return values ? values[0] : 0; }
  int32_t at(int64_t i) const { return values ? values[count > 1 ? i : 0] : 0; }
  bool anyNonZero() const {
    return values && std::any_of(values, values + count, [](int32_t v) { return v != 0; });
  }
};

class QGemmRun {
 public:
  QGemmRun(const QGemmProblem& p, const Layout& l, uint8_t* workspace)
      : p_(p), l_(l), ws_(workspace) {
    const bool left = l.weightsSide == QSide::kLeft;
    zW_ =
        left ? ZeroPoints{p.zeroLeft, p.zeroLeftCount} : ZeroPoints{p.zeroRight, p.zeroRightCount};
    zA_ =
        left ? ZeroPoints{p.zeroRight, p.zeroRightCount} : ZeroPoints{p.zeroLeft, p.zeroLeftCount};
    needActSums_ = zW_.anyNonZero();
    aAddUsed_ = needActSums_ && !zW_.perIndex();  // -zW·(sA - K·zA) with one zW
    actMask_ = p.activations.isSigned ? 0x80 : 0;
    const PackedQMatrix& w = *p.weights;
    kernel_ = l.ki->kernelMaddubs && w.maddubsSafe() ? l.ki->kernelMaddubs : l.ki->kernel;
    wAdd_ = reinterpret_cast<int32_t*>(ws_);
    negZW_ = wAdd_ + l.weightOuter;
    negZA_ = negZW_ + l.weightOuter;
    const int32_t* sW = w.sums();
    for (int64_t i = 0; i < l.weightOuter; ++i) {
      int64_t add = p.bias ? p.bias[i] : 0;
      if (!zA_.perIndex()) add -= static_cast<int64_t>(zA_.scalar()) * sW[i];
      wAdd_[i] = wrap(add);
      negZW_[i] = -zW_.at(i);
    }
    for (int64_t a = 0; a < l.actOuter; ++a) negZA_[a] = -zA_.at(a);
  }

  void runSlot(int64_t slot) const {
    uint8_t* base = ws_ + l_.globalBytes + static_cast<uint64_t>(slot) * l_.slotBytes;
    const int64_t first = slot * l_.items / l_.slots, last = (slot + 1) * l_.items / l_.slots;
    int64_t packedBlock = -1;
    for (int64_t item = first; item < last; ++item) {
      const int64_t block = item / l_.parts, part = item % l_.parts;
      if (block != packedBlock) {
        packBlock(block, base);
        packedBlock = block;
      }
      multiplyBlock(block, part, base);
    }
  }

 private:
  int32_t* slotInts(uint8_t* base, int k) const {
    const uint64_t ints =
        roundUp(static_cast<uint64_t>(l_.blockStrips * l_.actWidth) * sizeof(int32_t), kAlign);
    return reinterpret_cast<int32_t*>(base + l_.blockPackedBytes + k * ints);
  }

  void packBlock(int64_t block, uint8_t* base) const {
    const int64_t aFirst = block * l_.blockStrips * l_.actWidth;
    const int64_t aCount = std::min(l_.blockStrips * l_.actWidth, l_.actOuter - aFirst);
    packQStrips(p_.activations, aFirst, aCount, p_.K, l_.actWidth, actMask_, base);
    int32_t* sums = slotInts(base, 0);
    int32_t* add = slotInts(base, 1);
    int32_t* adjusted = slotInts(base, 2);  // sA - K * zA, the partner of -zW[w]
    if (!needActSums_) return;
    sumQOuter(p_.activations, aFirst, aCount, p_.K, actMask_, true, sums);
    for (int64_t i = 0; i < aCount; ++i) {
      const int64_t adj = sums[i] - p_.K * static_cast<int64_t>(zA_.at(aFirst + i));
      adjusted[i] = wrap(adj);
      add[i] = zW_.perIndex() ? 0 : wrap(-static_cast<int64_t>(zW_.scalar()) * adj);
    }
  }

  void multiplyBlock(int64_t block, int64_t part, uint8_t* base) const {
    const int64_t K = p_.K, kGroups = qgemmKGroups(K);
    const int64_t aStrip0 = block * l_.blockStrips;
    const int64_t aStrips = std::min(l_.blockStrips, l_.actStrips - aStrip0);
    const int64_t w0 = part * l_.weightStrips / l_.parts,
                  w1 = (part + 1) * l_.weightStrips / l_.parts;
    const uint64_t aStripBytes = static_cast<uint64_t>(qStripBytes(K, l_.actWidth));
    const uint64_t wStripBytes = static_cast<uint64_t>(qStripBytes(K, l_.weightWidth));
    const uint8_t* weights = reinterpret_cast<const uint8_t*>(p_.weights->data());
    const int32_t* sW = p_.weights->sums();
    const int32_t* aAdd = slotInts(base, 1);
    const int32_t* aAdjusted = slotInts(base, 2);
    const bool wLeft = l_.weightsSide == QSide::kLeft;
    const size_t elem =
        p_.output.dtype == DataType::kUint8 || p_.output.dtype == DataType::kInt8 ? 1 : 4;
    alignas(64) int32_t tile[kMaxTile];
    for (int64_t ws = w0; ws < w1; ++ws) {
      const uint8_t* wStrip = weights + ws * wStripBytes;
      const int64_t wFirst = ws * l_.weightWidth;
      const int64_t wCount = std::min(l_.weightWidth, l_.weightOuter - wFirst);
      for (int64_t as = 0; as < aStrips; ++as) {
        const uint8_t* aStrip = base + as * aStripBytes;
        const int64_t aLocal = as * l_.actWidth, aFirst = (aStrip0 + as) * l_.actWidth;
        const int64_t aCount = std::min(l_.actWidth, l_.actOuter - aFirst);
        // Terms along the weights axis and along the activations axis.
        const int32_t* wA = wAdd_ + wFirst;
        const int32_t* aA = aAddUsed_ ? aAdd + aLocal : nullptr;
        const int32_t* wP = zW_.perIndex() ? negZW_ + wFirst : nullptr;
        const int32_t* aP = zW_.perIndex() ? aAdjusted + aLocal : nullptr;
        const int32_t* wQ = zA_.perIndex() ? sW + wFirst : nullptr;
        const int32_t* aQ = zA_.perIndex() ? negZA_ + aFirst : nullptr;
        QTileTerms terms;
        int64_t row0, col0, rows, cols;
        if (wLeft) {
          kernel_(kGroups, wStrip, aStrip, tile, wCount, false);
          terms = {wA, aA, wP, aP, wQ, aQ};
          row0 = wFirst, col0 = aFirst, rows = wCount, cols = aCount;
        } else {
          kernel_(kGroups, aStrip, wStrip, tile, aCount, true);
          terms = {aA, wA, aP, wP, aQ, wQ};
          row0 = aFirst, col0 = wFirst, rows = aCount, cols = wCount;
        }
        void* c = static_cast<uint8_t*>(p_.C) + (row0 * p_.ldc + col0) * elem;
        l_.ki->finish(tile, l_.ki->nr, rows, cols, terms, p_.output, wLeft, wFirst, c, p_.ldc);
      }
    }
  }

  const QGemmProblem& p_;
  const Layout& l_;
  uint8_t* ws_;
  ZeroPoints zW_{nullptr, 1}, zA_{nullptr, 1};
  bool needActSums_ = false, aAddUsed_ = false;
  uint8_t actMask_ = 0;
  QGemmMicroKernelFn kernel_;
  int32_t* wAdd_;
  int32_t* negZW_;
  int32_t* negZA_;
};

}  // namespace

const QGemmKernelInfo& qgemmKernelFor(CpuIsa isa) {
  if (isa == CpuIsa::kAvx512Vnni) return qgemmKernelAvx512Vnni();
  if (isa == CpuIsa::kAvxVnni) return qgemmKernelAvxVnni();
  return qgemmKernelAvx2();
}

uint64_t PackedQMatrix::blobBytes(QSide side, CpuIsa isa, int64_t outer, int64_t depth) {
  return roundUp(packedBytes(side, isa, outer, depth), kAlign) +
         static_cast<uint64_t>(outer) * sizeof(int32_t);
}

uint64_t PackedQMatrix::sumsOffset() const {
  return roundUp(packedBytes(side_, isa_, outer_, depth_), kAlign);
}

std::vector<uint8_t> PackedQMatrix::params() const {
  return {static_cast<uint8_t>(sourceUnsigned_), static_cast<uint8_t>(maddubsSafe_)};
}

bool PackedQMatrix::view(QSide side, CpuIsa isa, int64_t outer, int64_t depth,
                         const std::vector<uint8_t>& params, std::shared_ptr<const uint8_t> blob,
                         PackedQMatrix& out) {
  if (params.size() != 2 || params[0] > 1 || params[1] > 1 || !blob) return false;
  out.bytes_ = std::move(blob);
  out.side_ = side;
  out.isa_ = isa;
  out.outer_ = outer;
  out.depth_ = depth;
  out.sourceUnsigned_ = params[0] != 0;
  out.maddubsSafe_ = params[1] != 0;
  return true;
}

PackedQMatrix packQWeights(QSide side, CpuIsa isa, int64_t outer, int64_t depth,
                           const QMatrixView& src) {
  PackedQMatrix m;
  m.side_ = side;
  m.isa_ = isa;
  m.outer_ = outer;
  m.depth_ = depth;
  m.sourceUnsigned_ = !src.isSigned;
  const uint64_t bytes = PackedQMatrix::blobBytes(side, isa, outer, depth);
  uint8_t* buffer = static_cast<uint8_t*>(allocateAligned(bytes));
  if (!buffer) throw std::bad_alloc();
  std::shared_ptr<uint8_t> owner(buffer, [](uint8_t* b) { std::free(b); });
  std::memset(buffer, 0, bytes);
  const uint8_t mask = src.isSigned ? 0 : 0x80;  // u8 weights stored as s8: w - 128
  const int64_t width = stripWidth(qgemmKernelFor(isa), side);
  packQStrips(src, 0, outer, depth, width, mask, buffer);
  m.bytes_ = owner;
  sumQOuter(src, 0, outer, depth, mask, false, reinterpret_cast<int32_t*>(buffer + m.sumsOffset()));
  m.maddubsSafe_ =
      pairsFitInt16(reinterpret_cast<const int8_t*>(buffer), packedBytes(side, isa, outer, depth));
  return m;
}

uint64_t qgemmWorkspaceBytes(QSide weightsSide, CpuIsa isa, int64_t M, int64_t N, int64_t K,
                             int threads) {
  const Layout l = layoutOf(weightsSide, isa, M, N, K, threads);
  return l.globalBytes + static_cast<uint64_t>(l.slots) * l.slotBytes;
}

void qgemm(const QGemmProblem& p, void* workspace) {
  if (p.M <= 0 || p.N <= 0) return;
  const Layout l = layoutOf(p.weights->side(), p.weights->isa(), p.M, p.N, p.K, poolThreads());
  const QGemmRun run(p, l, static_cast<uint8_t*>(workspace));
  ThreadPool* pool = currentThreadPool();
  if (pool && l.slots > 1) {
    pool->parallelFor(l.slots, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) run.runSlot(s);
    });
  } else {
    for (int64_t s = 0; s < l.slots; ++s) run.runSlot(s);
  }
}

}  // namespace kiln::cpu
