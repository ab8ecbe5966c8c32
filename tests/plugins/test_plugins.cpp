// Plugins of the tests, built as a separate shared library (libkiln_test_plugins.so) and loaded
// with `--plugins` / kiln::loadPluginLibrary: the registry, the ONNX fallback, plans and errors
// are tested through them. Uses only the public API.
#include <cstring>

#include "kiln/plugin.h"

namespace {

using kiln::DataType;
using kiln::DimExpr;
using kiln::ErrorCode;
using kiln::IPlugin;
using kiln::PluginFields;
using kiln::PluginFieldType;
using kiln::ShapeExpr;
using kiln::Status;
using kiln::Tensor;

// ---- The full path: kiln.test::ScaleCrop
// inputs (x, bias): output 0 = alpha * x + bias (bias broadcast along the last dim, usually an
// initializer), output 1 = the first ceil(W / crop_divisor) columns of output 0, with W = x's
// last dim. Fields: alpha (float, required), crop_divisor (int, default 2), tag (string), and
// the unused factors (floats) and names (strings), so that every field type is read.
class ScaleCrop : public IPlugin {
 public:
  explicit ScaleCrop(PluginFields fields) : fields_(std::move(fields)) {
    alpha_ = fields_.getFloat("alpha");
    divisor_ = fields_.getInt("crop_divisor", 2);
    if (divisor_ <= 0)
      throw kiln::Error(kiln::ErrorCode::kInvalidArgument, "crop_divisor must be positive");
  }
  std::string getPluginName() const override { return "ScaleCrop"; }
  std::string getPluginVersion() const override { return "2"; }
  std::string getPluginNamespace() const override { return "kiln.test"; }
  int getNbOutputs() const override { return 2; }
  std::vector<DimExpr> getOutputDimensions(int index,
                                           const std::vector<ShapeExpr>& in) const override {
    std::vector<DimExpr> dims = in.at(0);
    if (index == 1) dims.back() = ceilDiv(dims.back(), divisor_);
    return dims;
  }
  size_t getWorkspaceSize(const std::vector<kiln::PluginTensorDesc>& in,
                          const std::vector<kiln::PluginTensorDesc>&) const override {
    return static_cast<size_t>(in[0].dims.back()) * sizeof(float);  // one scaled row
  }
  Status configure(const std::vector<kiln::PluginTensorDesc>& in,
                   const std::vector<kiln::PluginTensorDesc>&) override {
    width_ = in[0].dims.back();
    if (in[1].dims.size() != 1 || in[1].dims[0] != width_) {
      return Status(ErrorCode::kInvalidValue,
                    "bias must have one value per column (" + std::to_string(width_) + ")");
    }
    ++configureCount_;
    return Status();
  }
  Status enqueue(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
                 void* workspace) override {
    const float* x = in[0]->data<float>();
    const float* bias = in[1]->data<float>();
    float* row = static_cast<float*>(workspace);
    float* y = out[0]->data<float>();
    float* crop = out[1]->data<float>();
    const int64_t rows = in[0]->numel() / width_;
    const int64_t cropWidth = out[1]->shape().back();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < width_; ++c) row[c] = alpha_ * x[r * width_ + c] + bias[c];
      std::memcpy(y + r * width_, row, sizeof(float) * static_cast<size_t>(width_));
      std::memcpy(crop + r * cropWidth, row, sizeof(float) * static_cast<size_t>(cropWidth));
    }
    return Status();
  }
  std::vector<uint8_t> serialize() const override { return fields_.serialize(); }
  std::unique_ptr<IPlugin> clone() const override { return std::make_unique<ScaleCrop>(*this); }

 private:
  PluginFields fields_;
  float alpha_ = 1;
  int64_t divisor_ = 2;
  int64_t width_ = 0;
  int configureCount_ = 0;
};

class ScaleCropCreator : public kiln::IPluginCreator {
 public:
  std::string getPluginName() const override { return "ScaleCrop"; }
  std::string getPluginVersion() const override { return "2"; }
  std::string getPluginNamespace() const override { return "kiln.test"; }
  std::vector<kiln::PluginFieldSpec> getFieldNames() const override {
    return {
        {"alpha", PluginFieldType::kFLOAT, true},    {"crop_divisor", PluginFieldType::kINT, false},
        {"tag", PluginFieldType::kSTRING, false},    {"factors", PluginFieldType::kFLOATS, false},
        {"names", PluginFieldType::kSTRINGS, false}, {"sizes", PluginFieldType::kINTS, false}};
  }
  std::unique_ptr<IPlugin> createPlugin(const std::string&,
                                        const PluginFields& fields) const override {
    return std::make_unique<ScaleCrop>(fields);
  }
  std::unique_ptr<IPlugin> deserializePlugin(const std::string&, const void* data,
                                             size_t size) const override {
    return std::make_unique<ScaleCrop>(PluginFields::deserialize(data, size));
  }
};
KILN_REGISTER_PLUGIN(ScaleCropCreator);

// ---- The simple path: TestClamp, y = min(max(x, lo), hi) with {"lo": .., "hi": ..} as info.
struct TestClamp : kiln::SimplePlugin<TestClamp> {
  Status run(const std::vector<const Tensor*>& in, Tensor& out) override {
    const float lo = fields().getFloat("lo", -1.0f), hi = fields().getFloat("hi", 1.0f);
    const float* x = in[0]->data<float>();
    float* y = out.data<float>();
    for (int64_t i = 0; i < out.numel(); ++i) y[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
    return Status();
  }
};
KILN_REGISTER_SIMPLE_PLUGIN(TestClamp, "TestClamp");

// ---- A plugin whose enqueue fails: kiln.test::AlwaysFails.
struct AlwaysFails : kiln::SimplePlugin<AlwaysFails> {
  Status run(const std::vector<const Tensor*>&, Tensor&) override {
    return Status(ErrorCode::kRuntimeError, "AlwaysFails refuses to compute (as the test wants)");
  }
};
KILN_REGISTER_SIMPLE_PLUGIN(AlwaysFails, "AlwaysFails", "1", "kiln.test");

}  // namespace
