// Runs an IR graph (after a pass) on the executor, for tests that compare graphs before and
// after rewriting.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "engine/executor.h"

namespace kiln::testing {

/// The graph's outputs for `inputs`, given in the order of g.inputs.
inline std::vector<Tensor> runGraph(const ir::Graph& g, const std::vector<Tensor>& inputs) {
  Executor executor(std::make_shared<ir::Graph>(g));
  std::vector<std::pair<int, Tensor>> bound;
  for (size_t i = 0; i < inputs.size(); ++i) bound.emplace_back(g.inputs[i], inputs[i]);
  return executor.run(bound);
}

/// Same shape, and every float element within tolerance x max(1, |expected|).
inline void expectClose(const Tensor& actual, const Tensor& expected, float tolerance) {
  ASSERT_EQ(actual.shape(), expected.shape());
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const float a = actual.data<float>()[i], e = expected.data<float>()[i];
    ASSERT_NEAR(a, e, tolerance * std::max(1.0f, std::fabs(e))) << "at element " << i;
  }
}

}  // namespace kiln::testing
