// Test::DynamicTRTResize: bicubic resize of input 0 to the height and width of input 1's dims
// 2 and 3 (its values are ignored), as in the OpenMMLab plugin tutorial's SRCNN variant. The
// output size follows input 1's shape at run time, within the engine's profile.
#include "kiln/plugin.h"
#include "plugins/bicubic_resize_compute.h"

namespace kiln::plugins {

namespace {

class DynamicTRTResize : public IPlugin {
 public:
  explicit DynamicTRTResize(PluginFields fields) : fields_(std::move(fields)) {
    alignCorners_ = fields_.getInt("align_corners", 0) != 0;
  }
  std::string getPluginName() const override { return "DynamicTRTResize"; }
  std::string getPluginNamespace() const override { return "Test"; }
  std::vector<DimExpr> getOutputDimensions(int, const std::vector<ShapeExpr>& in) const override {
    if (in.size() != 2 || in[0].size() != 4 || in[1].size() != 4) {
      throw Error(ErrorCode::kInvalidModel,
                  "DynamicTRTResize needs inputs (input, size_tensor), both of rank 4");
    }
    return {in[0][0], in[0][1], in[1][2], in[1][3]};
  }
  bool supportsFormatCombination(int pos, const std::vector<PluginTensorFormat>& inOut,
                                 int) const override {
    // size_tensor's values are never read, so any type will do for it.
    return pos == 1 || inOut[static_cast<size_t>(pos)].type == DataType::kFloat32;
  }
  Status enqueue(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
                 void*) override {
    const Shape& s = in[0]->shape();
    const Shape& o = out[0]->shape();
    bicubicResize(in[0]->data<float>(), out[0]->data<float>(), s[0] * s[1], s[2], s[3], o[2], o[3],
                  alignCorners_);
    return Status();
  }
  std::vector<uint8_t> serialize() const override { return fields_.serialize(); }
  std::unique_ptr<IPlugin> clone() const override {
    return std::make_unique<DynamicTRTResize>(*this);
  }

 private:
  PluginFields fields_;
  bool alignCorners_ = false;
};

class DynamicTRTResizeCreator : public IPluginCreator {
 public:
  std::string getPluginName() const override { return "DynamicTRTResize"; }
  std::string getPluginNamespace() const override { return "Test"; }
  std::vector<PluginFieldSpec> getFieldNames() const override {
    return {{"align_corners", PluginFieldType::kINT}};
  }
  std::unique_ptr<IPlugin> createPlugin(const std::string&,
                                        const PluginFields& fields) const override {
    return std::make_unique<DynamicTRTResize>(fields);
  }
  std::unique_ptr<IPlugin> deserializePlugin(const std::string&, const void* data,
                                             size_t size) const override {
    return std::make_unique<DynamicTRTResize>(PluginFields::deserialize(data, size));
  }
};

}  // namespace

KILN_REGISTER_PLUGIN(DynamicTRTResizeCreator);

}  // namespace kiln::plugins
