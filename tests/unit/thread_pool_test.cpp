// The intra-op thread pool, and SGEMM split across it.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallelFor(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads, n = " << n;
    }
  }
}

TEST(ThreadPool, ConcurrentCallersBothFinish) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    for (int r = 0; r < 200; ++r)
      pool.parallelFor(64, [&](int64_t b, int64_t e) { total += e - b; });
  };
  std::thread other(work);
  work();
  other.join();
  EXPECT_EQ(total.load(), 2 * 200 * 64);
}

TEST(ThreadPool, ParallelForAtLeastKeepsSmallLoopsOnTheCaller) {
  ThreadPool pool(2);
  ThreadPoolScope scope(&pool);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> blocks{0};
  std::atomic<bool> offCaller{false};
  parallelForAtLeast(1000, 600, [&](int64_t b, int64_t e) {  // fewer than 2 x 600 items: one block
    ++blocks;
    if (std::this_thread::get_id() != caller) offCaller = true;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 1000);
  });
  EXPECT_EQ(blocks.load(), 1);
  EXPECT_FALSE(offCaller.load());
  std::vector<std::atomic<int>> hits(5000);
  parallelForAtLeast(5000, 100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, NestedParallelForRunsInlineWithoutDeadlock) {
  ThreadPool pool(2);
  ThreadPoolScope scope(&pool);
  std::vector<std::atomic<int>> hits(64 * 64);
  parallelFor(64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      parallelFor(64, [&](int64_t b2, int64_t e2) {  // inner loop, from the caller or a worker
        for (int64_t j = b2; j < e2; ++j) hits[static_cast<size_t>(i * 64 + j)]++;
      });
    }
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, SgemmSplitAcrossThreadsMatchesOneThread) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{70, 300, 90}, {300, 40, 90}, {97, 101, 513}}) {
    std::vector<float> A(M * K), B(K * N), serial(M * N), parallel(M * N);
    for (float& v : A) v = dist(rng);
    for (float& v : B) v = dist(rng);
    sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, serial.data(), N);
    ThreadPool pool(3);
    ThreadPoolScope scope(&pool);
    sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, parallel.data(), N);
    EXPECT_EQ(serial, parallel) << M << "x" << N << "x" << K;
  }
}

}  // namespace
}  // namespace kiln::cpu
