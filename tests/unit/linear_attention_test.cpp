// LinearAttention's update rules against a hand-computed scalar recurrence (one head, dk = dv = 1,
// scale 1): q = [1, 1], k = [1, 2], v = [3, 4].
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using namespace kiln::testing;

Tensor steps(std::vector<float> v) {
  return Tensor::fromVector<float>(DataType::kFloat32, {1, 2, 1}, v);
}

NamedTensors run(const char* rule, bool withDecay, bool withBeta) {
  SingleNodeModel m("LinearAttention", 27);
  m.attr("update_rule", rule)
      .attr("q_num_heads", int64_t{1})
      .attr("kv_num_heads", int64_t{1})
      .attr("scale", 1.0f);
  m.input("q", steps({1, 1})).input("k", steps({1, 2})).input("v", steps({3, 4})).skipInput();
  if (withDecay)
    m.input("decay", steps({0, std::log(0.5f)}));
  else if (withBeta)
    m.skipInput();
  if (withBeta) m.input("beta", steps({1, 1}));
  return m.output("y").output("state").run();
}

TEST(LinearAttention, UpdateRules) {
  // linear: S = 3, then 3 + 2 * 4 = 11.
  auto linear = run("linear", false, false);
  EXPECT_THAT(valuesOf<float>(linear[0].second), ElementsAre(3, 11));
  EXPECT_EQ(linear[1].second.shape(), (Shape{1, 1, 1, 1}));
  EXPECT_THAT(valuesOf<float>(linear[1].second), ElementsAre(11));
  // gated: the state halves before step 2: 3 * 0.5 + 8 = 9.5.
  EXPECT_THAT(valuesOf<float>(run("gated", true, false)[0].second),
              ElementsAre(3, FloatNear(9.5f, 1e-5f)));
  // delta: step 2 stores v - S k = 4 - 6 = -2, so S = 3 + 2 * -2 = -1.
  EXPECT_THAT(valuesOf<float>(run("delta", false, true)[0].second), ElementsAre(3, -1));
}

}  // namespace
}  // namespace kiln
