// custom::deform_conv2d: deformable convolution with torchvision.ops.deform_conv2d's semantics.
// Inputs (input, weight, offset, mask, bias), mask and bias optional; attributes stride,
// padding, dilation (2 ints each), groups, offset_groups, use_mask.
#include "kiln/plugin.h"
#include "plugins/deform_conv2d_compute.h"

namespace kiln::plugins {

namespace {

class DeformConv2d : public IPlugin {
 public:
  DeformConv2d(std::string nodeName, PluginFields fields)
      : node_(std::move(nodeName)), fields_(std::move(fields)) {
    auto pair = [&](const char* name, int64_t fallback) {
      std::vector<int64_t> v = fields_.getInts(name, {fallback, fallback});
      if (v.size() != 2) {
        throw Error(
            ErrorCode::kInvalidModel,
            std::string("field '") + name + "' needs 2 values, got " + std::to_string(v.size()));
      }
      return v;
    };
    auto stride = pair("stride", 1), padding = pair("padding", 0), dilation = pair("dilation", 1);
    attrs_ = DeformConv2dAttrs{stride[0],
                               stride[1],
                               padding[0],
                               padding[1],
                               dilation[0],
                               dilation[1],
                               fields_.getInt("groups", 1),
                               fields_.getInt("offset_groups", 1)};
    useMask_ = fields_.getInt("use_mask", 1) != 0;
  }
  std::string getPluginName() const override { return "deform_conv2d"; }
  std::string getPluginNamespace() const override { return "custom"; }
  std::vector<DimExpr> getOutputDimensions(int, const std::vector<ShapeExpr>& in) const override {
    if (in.size() < 3 || in[0].size() != 4 || in[1].size() != 4) {
      throw Error(ErrorCode::kInvalidModel,
                  "deform_conv2d needs 4-D input and weight, and an offset");
    }
    auto extent = [](const DimExpr& size, int64_t pad, int64_t dilation, const DimExpr& kernel,
                     int64_t stride) {
      return (size + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1;
    };
    return {in[0][0], in[1][0],
            extent(in[0][2], attrs_.padH, attrs_.dilationH, in[1][2], attrs_.strideH),
            extent(in[0][3], attrs_.padW, attrs_.dilationW, in[1][3], attrs_.strideW)};
  }
  size_t getWorkspaceSize(const std::vector<PluginTensorDesc>& in,
                          const std::vector<PluginTensorDesc>&) const override {
    auto p = params(in);
    return p.ok() ? static_cast<size_t>(deformConv2dColumnsSize(*p)) * sizeof(float) : 0;
  }
  Status configure(const std::vector<PluginTensorDesc>& in,
                   const std::vector<PluginTensorDesc>&) override {
    if (useMask_ && !(in.size() > 3 && in[3].present)) {
      return Status(ErrorCode::kInvalidValue,
                    node_ + ": use_mask is 1 but the mask input is absent");
    }
    auto p = params(in);
    if (!p.ok()) return p.status();
    params_ = *p;
    return Status();
  }
  Status enqueue(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
                 void* workspace) override {
    const float* mask = useMask_ && in.size() > 3 && in[3] ? in[3]->data<float>() : nullptr;
    const float* bias = in.size() > 4 && in[4] ? in[4]->data<float>() : nullptr;
    deformConv2d(params_, in[0]->data<float>(), in[1]->data<float>(), in[2]->data<float>(), mask,
                 bias, out[0]->data<float>(), static_cast<float*>(workspace));
    return Status();
  }
  std::vector<uint8_t> serialize() const override { return fields_.serialize(); }
  std::unique_ptr<IPlugin> clone() const override { return std::make_unique<DeformConv2d>(*this); }

 private:
  Result<DeformConv2dParams> params(const std::vector<PluginTensorDesc>& in) const {
    auto dims = [&](size_t i) -> std::optional<std::vector<int64_t>> {
      if (i < in.size() && in[i].present) return in[i].dims;
      return std::nullopt;
    };
    return deformConv2dParams(node_, attrs_, in[0].dims, in[1].dims, in[2].dims,
                              useMask_ ? dims(3) : std::nullopt, dims(4));
  }

  std::string node_;
  PluginFields fields_;
  DeformConv2dAttrs attrs_;
  bool useMask_ = true;
  DeformConv2dParams params_;
};

class DeformConv2dCreator : public IPluginCreator {
 public:
  std::string getPluginName() const override { return "deform_conv2d"; }
  std::string getPluginNamespace() const override { return "custom"; }
  std::vector<PluginFieldSpec> getFieldNames() const override {
    return {{"stride", PluginFieldType::kINTS},       {"padding", PluginFieldType::kINTS},
            {"dilation", PluginFieldType::kINTS},     {"groups", PluginFieldType::kINT},
            {"offset_groups", PluginFieldType::kINT}, {"use_mask", PluginFieldType::kINT}};
  }
  std::unique_ptr<IPlugin> createPlugin(const std::string& name,
                                        const PluginFields& fields) const override {
    return std::make_unique<DeformConv2d>(name, fields);
  }
  std::unique_ptr<IPlugin> deserializePlugin(const std::string& name, const void* data,
                                             size_t size) const override {
    return std::make_unique<DeformConv2d>(name, PluginFields::deserialize(data, size));
  }
};

}  // namespace

KILN_REGISTER_PLUGIN(DeformConv2dCreator);

}  // namespace kiln::plugins
