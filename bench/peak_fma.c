/* Peak FP32 FMA throughput of one core, for bench/run_bench.py when the GEMM micro-benchmark
 * (bench/micro) is not built. Independent FMA chains on registers only, so memory plays no part;
 * 16 chains cover the FMA latency times the number of FMA ports on current x86 cores.
 * Prints one JSON line: {"avx2_fma_gflops": G, "avx512_fma_gflops": G or null}.
 * Build: cc -O2 -o peak_fma peak_fma.c (the ISA is chosen per function, checked at run time). */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define CHAINS 16
#define ROUNDS 20000000L

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);  /* CPU time: robust to other load */
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Each returns the GFLOP/s of its best of 3 timed runs; the sum is printed to keep the work alive. */
__attribute__((target("avx2,fma"))) static double avx2_gflops(float *sink) {
  double best = 0.0;
  for (int trial = 0; trial < 3; ++trial) {
    __m256 acc[CHAINS];
    for (int i = 0; i < CHAINS; ++i) acc[i] = _mm256_set1_ps((float)i * 1e-3f);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    double start = now();
    for (long r = 0; r < ROUNDS; ++r) {
#pragma GCC unroll 16
      for (int i = 0; i < CHAINS; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    }
    double seconds = now() - start;
    for (int i = 1; i < CHAINS; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
    *sink += _mm256_cvtss_f32(acc[0]);
    double gflops = 2.0 * 8 * CHAINS * (double)ROUNDS / seconds / 1e9;
    if (gflops > best) best = gflops;
  }
  return best;
}

__attribute__((target("avx512f"))) static double avx512_gflops(float *sink) {
  double best = 0.0;
  for (int trial = 0; trial < 3; ++trial) {
    __m512 acc[CHAINS];
    for (int i = 0; i < CHAINS; ++i) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    double start = now();
    for (long r = 0; r < ROUNDS; ++r) {
#pragma GCC unroll 16
      for (int i = 0; i < CHAINS; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    }
    double seconds = now() - start;
    for (int i = 1; i < CHAINS; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    *sink += _mm512_reduce_add_ps(acc[0]);
    double gflops = 2.0 * 16 * CHAINS * (double)ROUNDS / seconds / 1e9;
    if (gflops > best) best = gflops;
  }
  return best;
}

int main(void) {
  float sink = 0.0f;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    fprintf(stderr, "peak_fma: this CPU has no AVX2+FMA\n");
    return 1;
  }
  double avx2 = avx2_gflops(&sink);
  if (__builtin_cpu_supports("avx512f")) {
    printf("{\"avx2_fma_gflops\": %.2f, \"avx512_fma_gflops\": %.2f, \"sink\": %g}\n", avx2, avx512_gflops(&sink),
           (double)sink);
  } else {
    printf("{\"avx2_fma_gflops\": %.2f, \"avx512_fma_gflops\": null, \"sink\": %g}\n", avx2, (double)sink);
  }
  return 0;
}
