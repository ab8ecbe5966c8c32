// CPU kernels of the ai.onnx.ml feature transforms: Scaler ((x - offset) * scale), Normalizer
// (rows over their MAX, L1 or L2 norm), Imputer (a replaced value or NaN becomes the imputed
// one), OneHotEncoder, FeatureVectorizer (inputs' columns side by side) and CategoryMapper
// (string <-> int64 through two parallel lists).
#include <cmath>
#include <map>
#include <memory>

#include "backends/cpu/kernels/elementwise_util.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

/// The last dim of X (its length for a 1-D X) and the number of rows before it.
std::pair<int64_t, int64_t> rowsAndColumns(const Tensor& x) {
  const int64_t cols = x.rank() == 0 ? 1 : x.shape().back();
  return {cols == 0 ? 0 : x.numel() / cols, cols};
}

/// A per-column attribute: one value for every column, or one per column.
float perColumn(const std::vector<float>& v, int64_t c) { return v.size() == 1 ? v[0] : v[c]; }

void checkPerColumn(KernelContext& ctx, const std::vector<float>& v, int64_t cols,
                    const char* what) {
  if (v.size() != 1 && static_cast<int64_t>(v.size()) != cols)
    ctx.fail(std::string("attribute '") + what + "' has " + std::to_string(v.size()) +
                 " values; X has " + std::to_string(cols) + " columns (1 or one per column)",
             ErrorCode::kInvalidArgument);
}

KernelFn makeScaler(const KernelCreateInfo& info) {
  auto offset = std::make_shared<std::vector<float>>(ir::attrFloats(info.node, "offset", {0.0f}));
  auto scale = std::make_shared<std::vector<float>>(ir::attrFloats(info.node, "scale", {1.0f}));
  if (offset->empty()) *offset = {0.0f};
  if (scale->empty()) *scale = {1.0f};
  return [offset, scale](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const auto [rows, cols] = rowsAndColumns(x);
    checkPerColumn(ctx, *offset, cols, "offset");
    checkPerColumn(ctx, *scale, cols, "scale");
    Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, x.shape());
    float* out = y.data<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        out[i] = (static_cast<float>(x.doubleAt(i)) - perColumn(*offset, c)) * perColumn(*scale, c);
      }
  };
}

KernelFn makeNormalizer(const KernelCreateInfo& info) {
  const std::string norm = ir::attrString(info.node, "norm", "MAX");
  if (norm != "MAX" && norm != "L1" && norm != "L2")
    ir::failNode(info.node, "attribute 'norm' is '" + norm + "'; expected MAX, L1 or L2");
  return [norm](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 1 && x.rank() != 2)
      ctx.fail("X must be (N, C) or (C), got " + x.describe(), ErrorCode::kInvalidArgument);
    const auto [rows, cols] = rowsAndColumns(x);
    Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, x.shape());
    float* out = y.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      float* yr = out + r * cols;
      for (int64_t c = 0; c < cols; ++c) yr[c] = static_cast<float>(x.doubleAt(r * cols + c));
      float by = 0;
      if (norm == "MAX") {
        by = cols > 0 ? *std::max_element(yr, yr + cols) : 0.0f;
      } else {
        for (int64_t c = 0; c < cols; ++c) by += norm == "L1" ? std::fabs(yr[c]) : yr[c] * yr[c];
        if (norm == "L2") by = std::sqrt(by);
      }
      if (by != 0)  // a zero row stays as it is
        for (int64_t c = 0; c < cols; ++c) yr[c] /= by;
    }
  };
}

KernelFn makeImputer(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  const bool floats = ir::hasAttr(node, "imputed_value_floats");
  if (floats == ir::hasAttr(node, "imputed_value_int64s"))
    ir::failNode(node, "needs exactly one of 'imputed_value_floats' and 'imputed_value_int64s'");
  auto imputedF = std::make_shared<std::vector<float>>(
      floats ? ir::attrFloats(node, "imputed_value_floats") : std::vector<float>{});
  auto exact = std::make_shared<std::vector<int64_t>>(
      floats ? std::vector<int64_t>{} : ir::attrInts(node, "imputed_value_int64s"));
  const float replacedF = ir::attrFloat(node, "replaced_value_float", 0.0f);
  const int64_t replacedI = ir::attrInt(node, "replaced_value_int64", 0);
  return [floats, imputedF, exact, replacedF, replacedI](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const bool floatInput = isFloatingPoint(x.dtype());
    if (floatInput != floats)
      ctx.fail("X of type " + dataTypeName(x.dtype()) + " needs " +
                   (floatInput ? "imputed_value_floats" : "imputed_value_int64s"),
               ErrorCode::kInvalidArgument);
    // Plain variables: a structured binding cannot be captured by the lambda below in C++17.
    const std::pair<int64_t, int64_t> shape2d = rowsAndColumns(x);
    const int64_t rows = shape2d.first, cols = shape2d.second;
    const size_t count = floats ? imputedF->size() : exact->size();
    if (count != 1 && static_cast<int64_t>(count) != cols)
      ctx.fail("the imputed values (" + std::to_string(count) + ") are neither 1 nor one per " +
                   "column of X (" + std::to_string(cols) + ")",
               ErrorCode::kInvalidArgument);
    Tensor& y = ctx.allocateOutput(0, x.dtype(), x.shape());
    dispatchNumeric(x.dtype(), "Imputer", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.data<T>();
      T* out = y.data<T>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t i = r * cols + c;
          const size_t k = count == 1 ? 0 : static_cast<size_t>(c);
          if constexpr (std::is_floating_point_v<T>) {
            const bool replace =
                std::isnan(replacedF) ? std::isnan(in[i]) : in[i] == static_cast<T>(replacedF);
            out[i] = replace ? static_cast<T>((*imputedF)[k]) : in[i];
          } else {
            out[i] = static_cast<int64_t>(in[i]) == replacedI ? static_cast<T>((*exact)[k]) : in[i];
          }
        }
    });
  };
}

/// Categories keyed as text (strings) or integers (every numeric X, as onnxruntime casts it).
struct Categories {
  std::map<std::string, int64_t> strings;
  std::map<int64_t, int64_t> ints;
  bool isString = false;
  int64_t size = 0;
};

KernelFn makeOneHotEncoder(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  auto cats = std::make_shared<Categories>();
  cats->isString = ir::hasAttr(node, "cats_strings");
  if (cats->isString == ir::hasAttr(node, "cats_int64s"))
    ir::failNode(node, "needs exactly one of 'cats_strings' and 'cats_int64s'");
  if (cats->isString) {
    const std::vector<std::string> v = ir::attrStrings(node, "cats_strings");
    for (size_t i = 0; i < v.size(); ++i) cats->strings.emplace(v[i], static_cast<int64_t>(i));
    cats->size = static_cast<int64_t>(v.size());
  } else {
    const std::vector<int64_t> v = ir::attrInts(node, "cats_int64s");
    for (size_t i = 0; i < v.size(); ++i) cats->ints.emplace(v[i], static_cast<int64_t>(i));
    cats->size = static_cast<int64_t>(v.size());
  }
  const bool zeros = ir::attrInt(node, "zeros", 1) != 0;
  return [cats, zeros](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if ((x.dtype() == DataType::kString) != cats->isString)
      ctx.fail("X of type " + dataTypeName(x.dtype()) + " does not match the " +
                   (cats->isString ? "string" : "int64") + " categories",
               ErrorCode::kInvalidArgument);
    Shape shape = x.shape();
    shape.push_back(cats->size);
    Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, shape);
    float* out = y.data<float>();
    std::fill(out, out + y.numel(), 0.0f);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t at = -1;
      if (cats->isString) {
        const auto it = cats->strings.find(x.data<std::string>()[i]);
        if (it != cats->strings.end()) at = it->second;
      } else {
        const auto it = cats->ints.find(static_cast<int64_t>(x.doubleAt(i)));
        if (it != cats->ints.end()) at = it->second;
      }
      if (at >= 0)
        out[i * cats->size + at] = 1.0f;
      else if (!zeros)
        ctx.fail("value " + std::to_string(i) + " of X is not a category (attribute 'zeros' is 0)",
                 ErrorCode::kInvalidArgument);
    }
  };
}

KernelFn makeFeatureVectorizer(const KernelCreateInfo& info) {
  const std::vector<int64_t> dims = ir::attrInts(info.node, "inputdimensions");
  if (dims.size() != info.inputTypes.size())
    ir::failNode(info.node, "attribute 'inputdimensions' has " + std::to_string(dims.size()) +
                                " entries for " + std::to_string(info.inputTypes.size()) +
                                " inputs");
  int64_t total = 0;
  for (int64_t d : dims) {
    if (d < 0) ir::failNode(info.node, "attribute 'inputdimensions' has a negative entry");
    total += d;
  }
  return [dims, total](KernelContext& ctx) {
    const Tensor& first = ctx.input(0);
    const int64_t rows = first.rank() <= 1 ? 1 : first.dim(0);
    Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, {rows, total});
    float* out = y.data<float>();
    std::fill(out, out + y.numel(), 0.0f);
    int64_t at = 0;
    for (size_t k = 0; k < dims.size(); ++k) {
      const Tensor& x = ctx.input(k);
      const int64_t xRows = x.rank() <= 1 ? 1 : x.dim(0);
      if (xRows != rows)
        ctx.fail("input " + std::to_string(k) + " has " + std::to_string(xRows) +
                     " rows, input 0 has " + std::to_string(rows),
                 ErrorCode::kInvalidArgument);
      const int64_t cols = rows == 0 ? 0 : x.numel() / rows;
      const int64_t take = std::min(cols, dims[k]);  // a narrower input is padded with zeros
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < take; ++c)
          out[r * total + at + c] = static_cast<float>(x.doubleAt(r * cols + c));
      at += dims[k];
    }
  };
}

KernelFn makeCategoryMapper(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  const std::vector<std::string> strings = ir::attrStrings(node, "cats_strings");
  const std::vector<int64_t> ints = ir::attrInts(node, "cats_int64s");
  if (strings.size() != ints.size())
    ir::failNode(node, "attributes 'cats_strings' (" + std::to_string(strings.size()) +
                           ") and 'cats_int64s' (" + std::to_string(ints.size()) +
                           ") differ in length");
  auto toInt = std::make_shared<std::map<std::string, int64_t>>();
  auto toString = std::make_shared<std::map<int64_t, std::string>>();
  for (size_t i = 0; i < strings.size(); ++i) {
    toInt->emplace(strings[i], ints[i]);
    toString->emplace(ints[i], strings[i]);
  }
  const int64_t defaultInt = ir::attrInt(node, "default_int64", -1);
  const std::string defaultString = ir::attrString(node, "default_string", "_Unused");
  return [toInt, toString, defaultInt, defaultString](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.dtype() == DataType::kString) {
      Tensor& y = ctx.allocateOutput(0, DataType::kInt64, x.shape());
      for (int64_t i = 0; i < x.numel(); ++i) {
        const auto it = toInt->find(x.data<std::string>()[i]);
        y.data<int64_t>()[i] = it == toInt->end() ? defaultInt : it->second;
      }
      return;
    }
    if (x.dtype() != DataType::kInt64)
      ctx.fail("X must be string or int64, got " + dataTypeName(x.dtype()),
               ErrorCode::kInvalidArgument);
    Tensor& y = ctx.allocateOutput(0, DataType::kString, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const auto it = toString->find(x.data<int64_t>()[i]);
      y.data<std::string>()[i] = it == toString->end() ? defaultString : it->second;
    }
  };
}

KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "Scaler", KernelFactory(makeScaler));
KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "Normalizer", KernelFactory(makeNormalizer));
KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "Imputer", KernelFactory(makeImputer));
KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "OneHotEncoder", KernelFactory(makeOneHotEncoder));
KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "FeatureVectorizer",
                                KernelFactory(makeFeatureVectorizer));
KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "CategoryMapper", KernelFactory(makeCategoryMapper));

}  // namespace
}  // namespace kiln::cpu
