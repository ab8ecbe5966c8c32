// Session::run never hands out storage the caller does not own: an output that is an input (or
// a view of one) or a weight comes back as a copy, so writing to it changes nothing else.
#include <gtest/gtest.h>

#include "kiln/session.h"
#include "model_builder.h"

namespace kiln {
namespace {

using namespace kiln::testing;

TEST(SessionOutputs, AnInputOrAWeightReturnedAsAnOutputIsACopy) {
  auto m = makeModel();
  addInput(m, "x", {2});
  addFloatInitializer(m, "w", {2}, {5, 6});
  addNode(m, "Identity", {"x"}, {"same"});
  addNode(m, "Reshape", {"x", "shape"}, {"view"});
  addInt64Initializer(m, "shape", {2, 1});
  addNode(m, "Identity", {"w"}, {"weight"});
  addOutput(m, "same", {2});
  addOutput(m, "view", {2, 1});
  addOutput(m, "weight", {2});
  for (bool optimize : {true, false}) {
    SessionOptions options;
    options.optimize = optimize;
    const std::string bytes = m.SerializeAsString();
    Session s(bytes.data(), bytes.size(), options);
    Tensor x = Tensor::fromVector<float>(DataType::kFloat32, {2}, {1, 2});
    auto out = s.run({{"x", x}});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_NE(out[0].second.raw(), x.raw());
    EXPECT_NE(out[1].second.raw(), x.raw());
    EXPECT_EQ(out[0].second.data<float>()[1], 2);
    EXPECT_EQ(out[1].second.data<float>()[1], 2);
    out[2].second.data<float>()[0] = -1;  // must not reach the model's weight
    EXPECT_EQ(s.run({{"x", x}})[2].second.data<float>()[0], 5) << "optimize=" << optimize;
  }
}

}  // namespace
}  // namespace kiln
