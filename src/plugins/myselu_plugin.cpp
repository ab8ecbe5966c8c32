// MYSELU: an op in the default domain that ONNX does not define, with inputs (x, p, constant)
// and the attributes attr1 (string), attr2 (ints), attr3 (float) that the exporting symbolic()
// writes as g.op("MYSELU", ..., attr1_s=..., attr2_i=[1, 2, 3], attr3_f=222) (the suffix gives the
// type and is not part of the name); y = x * sigmoid(x). Its fields are kept (and serialized)
// though the result does not use them, as in the deployment tutorial this example follows.
#include "kiln/plugin.h"
#include "plugins/myselu_compute.h"

namespace kiln::plugins {

namespace {

class MySelu : public IPlugin {
 public:
  explicit MySelu(PluginFields fields) : fields_(std::move(fields)) {}
  std::string getPluginName() const override { return "MYSELU"; }
  bool supportsFormatCombination(int pos, const std::vector<PluginTensorFormat>& inOut,
                                 int nbInputs) const override {
    // Only x (position 0) and y are read and written; p and the constant may be of any type.
    return (pos > 0 && pos < nbInputs) ||
           inOut[static_cast<size_t>(pos)].type == DataType::kFloat32;
  }
  Status enqueue(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
                 void*) override {
    myselu(in[0]->data<float>(), out[0]->data<float>(), in[0]->numel());
    return Status();
  }
  std::vector<uint8_t> serialize() const override { return fields_.serialize(); }
  std::unique_ptr<IPlugin> clone() const override { return std::make_unique<MySelu>(*this); }
  const PluginFields& fields() const { return fields_; }

 private:
  PluginFields fields_;
};

class MySeluCreator : public IPluginCreator {
 public:
  std::string getPluginName() const override { return "MYSELU"; }
  std::vector<PluginFieldSpec> getFieldNames() const override {
    return {{"attr1", PluginFieldType::kSTRING},
            {"attr2", PluginFieldType::kINTS},
            {"attr3", PluginFieldType::kFLOAT}};
  }
  std::unique_ptr<IPlugin> createPlugin(const std::string&,
                                        const PluginFields& fields) const override {
    return std::make_unique<MySelu>(fields);
  }
  std::unique_ptr<IPlugin> deserializePlugin(const std::string&, const void* data,
                                             size_t size) const override {
    return std::make_unique<MySelu>(PluginFields::deserialize(data, size));
  }
};

}  // namespace

KILN_REGISTER_PLUGIN(MySeluCreator);

}  // namespace kiln::plugins
