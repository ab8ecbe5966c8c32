#include "tensor_summary.h"

#include <cmath>
#include <iomanip>
#include <random>
#include <sstream>

#include "core/dtype_dispatch.h"

namespace kiln::cli {

std::string summarizeTensor(const std::string& name, const Tensor& t) {
  std::ostringstream os;
  os << "  " << name << "  " << t.describe();
  if (t.mapKeyType() != DataType::kUndefined) return os.str();  // maps: the count is enough
  if (t.isSequence()) {  // the items' shapes, then each item's statistics would be too long
    std::string shapes;
    for (const Tensor& item : t.sequenceItems())
      shapes += (shapes.empty() ? "" : ", ") + shapeToString(item.shape());
    if (!shapes.empty()) os << ": " << shapes;
    return os.str();
  }
  if (t.dtype() == DataType::kString || t.numel() == 0) return os.str();
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.doubleAt(i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  os << std::setprecision(6) << "  min " << lo << "  max " << hi << "  mean "
     << (t.numel() > nans ? sum / static_cast<double>(t.numel() - nans) : NAN);
  if (nans) os << "  nan " << nans;
  return os.str();
}

std::string describeInfoShape(const TensorInfo& info) {
  if (!info.hasShape) return "?";
  if (info.shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < info.shape.size(); ++i) {
    if (i) s += "x";
    s += info.shape[i] >= 0 ? std::to_string(info.shape[i])
                            : (info.dimNames[i].empty() ? "?" : info.dimNames[i]);
  }
  return s;
}

std::string describeInfoType(const TensorInfo& info) {
  const std::string element =
      info.mapKeyType == DataType::kUndefined
          ? dataTypeName(info.dtype)
          : "map<" + dataTypeName(info.mapKeyType) + "," + dataTypeName(info.dtype) + ">";
  std::string type = info.isSequence
                         ? "sequence<" + element + ">"
                         : dataTypeName(info.dtype) + "[" + describeInfoShape(info) + "]";
  return info.isOptionalType ? "optional<" + type + ">" : type;
}

Shape parseShape(const std::string& text) {
  Shape shape;
  if (text.empty() || text == "scalar") return shape;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
    }
    if (used != part.size() || v < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "bad shape '" + text + "': expected dims like 1x3x224x224");
    }
    shape.push_back(v);
  }
  return shape;
}

std::map<std::string, Shape> parseShapeOptions(const std::vector<std::string>& options) {
  std::map<std::string, Shape> shapes;
  for (const std::string& opt : options) {
    auto colon = opt.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "bad --shapes value '" + opt + "': expected NAME:1x3x224x224");
    }
    shapes[opt.substr(0, colon)] = parseShape(opt.substr(colon + 1));
  }
  return shapes;
}

Tensor randomTensor(DataType dtype, const Shape& shape, uint64_t seed) {
  Tensor t(dtype, shape);
  std::mt19937_64 rng(seed);
  if (dtype == DataType::kString) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<std::string>()[i] = std::to_string(rng() % 10);
    return t;
  }
  dispatchNumericOrBool(dtype, "random input", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    if constexpr (std::is_same_v<T, bool>) {
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng() & 1;
    } else if constexpr (std::is_integral_v<T>) {
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(rng() % 10);
    } else {
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(dist(rng));
    }
  });
  return t;
}

std::string sanitizeFileName(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s;
}

}  // namespace kiln::cli
