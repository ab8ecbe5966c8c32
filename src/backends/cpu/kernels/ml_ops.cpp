// CPU kernels of ai.onnx.ml ops: Binarizer (x > threshold ? 1 : 0), ArrayFeatureExtractor
// (X[..., indices]) and LabelEncoder (a key -> value table with a default for unknown keys).
#include <cmath>
#include <map>

#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

void binarizerKernel(KernelContext& ctx, double threshold) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  dispatchNumeric(x.dtype(), "Binarizer", [&](auto tag) {
    using T = typename decltype(tag)::type;
    mapUnary<T, T>(x, y, [threshold](auto v) {
      return static_cast<decltype(v)>(static_cast<double>(v) > threshold ? 1 : 0);
    });
  });
}

void arrayFeatureExtractorKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> index = ctx.input(1).toInt64Vector();
  const int64_t last = x.rank() == 0 ? 1 : x.shape().back();
  for (int64_t i : index) {
    if (i < 0 || i >= last)
      ctx.fail(
          "index " + std::to_string(i) + " is outside the last dim (" + std::to_string(last) + ")",
          ErrorCode::kInvalidArgument);
  }
  Shape outShape = x.rank() <= 1 ? Shape{1} : Shape(x.shape().begin(), x.shape().end() - 1);
  outShape.push_back(static_cast<int64_t>(index.size()));
  Tensor& y = ctx.allocateOutput(0, x.dtype(), outShape);
  const int64_t rows = last == 0 ? 0 : x.numel() / last;
  dispatchStorage(x.dtype(), "ArrayFeatureExtractor", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i : index) *out++ = in[r * last + i];
  });
}

/// A LabelEncoder attribute set (keys or values) as a tensor: *_strings, *_int64s, *_floats or
/// *_tensor.
Tensor labelTable(const ir::Node& node, const std::string& prefix) {
  if (ir::hasAttr(node, prefix + "_strings")) {
    const std::vector<std::string> v = ir::attrStrings(node, prefix + "_strings");
    Tensor t(DataType::kString, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data<std::string>());
    return t;
  }
  if (ir::hasAttr(node, prefix + "_int64s")) {
    const std::vector<int64_t> v = ir::attrInts(node, prefix + "_int64s");
    return Tensor::fromVector<int64_t>(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
  }
  if (ir::hasAttr(node, prefix + "_floats")) {
    const std::vector<float> v = ir::attrFloats(node, prefix + "_floats");
    return Tensor::fromVector<float>(DataType::kFloat32, {static_cast<int64_t>(v.size())}, v);
  }
  if (ir::hasAttr(node, prefix + "_tensor")) return ir::attrTensor(node, prefix + "_tensor");
  ir::failNode(node, "needs one of " + prefix + "_strings, " + prefix + "_int64s, " + prefix +
                         "_floats or " + prefix + "_tensor");
}

/// The value for unknown keys: default_tensor, or default_string/int64/float for the value type.
Tensor labelDefault(const ir::Node& node, DataType type) {
  if (ir::hasAttr(node, "default_tensor")) {
    Tensor d = ir::attrTensor(node, "default_tensor");
    if (d.dtype() != type || d.numel() != 1)
      ir::failNode(node, "default_tensor must hold one value of the values' type");
    return d;
  }
  if (type == DataType::kString) {
    Tensor t(DataType::kString, {1});
    t.data<std::string>()[0] = ir::attrString(node, "default_string", "_Unused");
    return t;
  }
  if (type == DataType::kInt64)
    return Tensor::fromVector<int64_t>(DataType::kInt64, {1},
                                       {ir::attrInt(node, "default_int64", -1)});
  if (type == DataType::kFloat32)
    return Tensor::fromVector<float>(DataType::kFloat32, {1},
                                     {ir::attrFloat(node, "default_float", -0.0f)});
  ir::failNode(node, "values of type " + dataTypeName(type) + " need a default_tensor");
}

/// Keys in one comparable form: strings as they are, integers exactly, floats as doubles with
/// NaN equal to NaN.
struct LabelKey {
  std::string text;
  int64_t integer = 0;
  double number = 0;
  bool operator<(const LabelKey& o) const {
    if (text != o.text) return text < o.text;
    if (integer != o.integer) return integer < o.integer;
    const bool nanA = std::isnan(number), nanB = std::isnan(o.number);
    if (nanA || nanB) return nanA < nanB;
    return number < o.number;
  }
};

LabelKey keyAt(const Tensor& t, int64_t i) {
  if (t.dtype() == DataType::kString) return LabelKey{t.data<std::string>()[i], 0, 0};
  if (!isFloatingPoint(t.dtype())) return LabelKey{{}, t.intAt(i), 0};
  return LabelKey{{}, 0, t.doubleAt(i)};
}

KernelFn makeLabelEncoder(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  auto keys = std::make_shared<Tensor>(labelTable(node, "keys"));
  auto values = std::make_shared<Tensor>(labelTable(node, "values"));
  if (keys->numel() != values->numel())
    ir::failNode(node, "keys and values must have the same length");
  auto fallback = std::make_shared<Tensor>(labelDefault(node, values->dtype()));
  auto table = std::make_shared<std::map<LabelKey, int64_t>>();
  for (int64_t i = 0; i < keys->numel(); ++i) table->emplace(keyAt(*keys, i), i);
  return [keys, values, fallback, table](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if ((x.dtype() == DataType::kString) != (keys->dtype() == DataType::kString)) {
      ctx.fail("input of type " + dataTypeName(x.dtype()) + " does not match keys of type " +
                   dataTypeName(keys->dtype()),
               ErrorCode::kInvalidArgument);
    }
    Tensor& y = ctx.allocateOutput(0, values->dtype(), x.shape());
    dispatchStorage(values->dtype(), "LabelEncoder", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* out = y.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const auto it = table->find(keyAt(x, i));
        out[i] = it == table->end() ? fallback->data<T>()[0] : values->data<T>()[it->second];
      }
    });
  };
}

KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "Binarizer",
                                bindKernel(
                                    [](const ir::Node& node) {
                                      return static_cast<double>(
                                          ir::attrFloat(node, "threshold", 0.0f));
                                    },
                                    binarizerKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "ArrayFeatureExtractor", arrayFeatureExtractorKernel);
KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "LabelEncoder", KernelFactory(makeLabelEncoder));

}  // namespace
}  // namespace kiln::cpu
