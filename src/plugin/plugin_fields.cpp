// PluginFields: typed getters with clear errors, a byte encoding for plans, and JSON parsing for
// the simple path's `info` attribute.
#include <cstring>
#include <nlohmann/json.hpp>

#include "kiln/error.h"
#include "kiln/plugin.h"

namespace kiln {

const char* pluginFieldTypeName(PluginFieldType type) {
  static const char* names[] = {"int", "float", "string", "ints", "floats", "strings", "tensor"};
  return names[static_cast<int>(type)];
}

PluginFields& PluginFields::set(const std::string& name, PluginFieldValue value) {
  values_[name] = std::move(value);
  return *this;
}

PluginFieldType PluginFields::type(const std::string& name) const {
  return static_cast<PluginFieldType>(get(name).index());
}

const PluginFieldValue& PluginFields::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end())
    throw Error(ErrorCode::kInvalidArgument, "plugin field '" + name + "' is missing");
  return it->second;
}

namespace {

[[noreturn]] void wrongType(const std::string& name, PluginFieldType expected,
                            const PluginFieldValue& given) {
  throw Error(ErrorCode::kInvalidArgument,
              "plugin field '" + name + "' expects type " + pluginFieldTypeName(expected) +
                  ", given " + pluginFieldTypeName(static_cast<PluginFieldType>(given.index())));
}

template <typename T>
const T& as(const std::string& name, const PluginFieldValue& v, PluginFieldType expected) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  wrongType(name, expected, v);
}

}  // namespace

int64_t PluginFields::getInt(const std::string& name) const {
  return as<int64_t>(name, get(name), PluginFieldType::kINT);
}
int64_t PluginFields::getInt(const std::string& name, int64_t fallback) const {
  return has(name) ? getInt(name) : fallback;
}

float PluginFields::getFloat(const std::string& name) const {
  const PluginFieldValue& v = get(name);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<float>(*i);
  return as<float>(name, v, PluginFieldType::kFLOAT);
}
float PluginFields::getFloat(const std::string& name, float fallback) const {
  return has(name) ? getFloat(name) : fallback;
}

std::string PluginFields::getString(const std::string& name) const {
  return as<std::string>(name, get(name), PluginFieldType::kSTRING);
}
std::string PluginFields::getString(const std::string& name, const std::string& fallback) const {
  return has(name) ? getString(name) : fallback;
}

std::vector<int64_t> PluginFields::getInts(const std::string& name) const {
  return as<std::vector<int64_t>>(name, get(name), PluginFieldType::kINTS);
}
std::vector<int64_t> PluginFields::getInts(const std::string& name,
                                           const std::vector<int64_t>& fallback) const {
  return has(name) ? getInts(name) : fallback;
}

std::vector<float> PluginFields::getFloats(const std::string& name) const {
  const PluginFieldValue& v = get(name);
  if (const auto* i = std::get_if<std::vector<int64_t>>(&v))
    return std::vector<float>(i->begin(), i->end());
  return as<std::vector<float>>(name, v, PluginFieldType::kFLOATS);
}
std::vector<float> PluginFields::getFloats(const std::string& name,
                                           const std::vector<float>& fallback) const {
  return has(name) ? getFloats(name) : fallback;
}

std::vector<std::string> PluginFields::getStrings(const std::string& name) const {
  return as<std::vector<std::string>>(name, get(name), PluginFieldType::kSTRINGS);
}

const Tensor& PluginFields::getTensor(const std::string& name) const {
  return as<Tensor>(name, get(name), PluginFieldType::kTENSOR);
}

// ---- byte encoding: u32 count, then per field: str name, u8 type, payload (little-endian).

namespace {

class Writer {
 public:
  std::vector<uint8_t> bytes;
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
  template <typename T>
  void put(T v) {
    raw(&v, sizeof(T));
  }
  void str(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  void need(size_t k) const {
    if (k > n_ - pos_) {
      throw Error(ErrorCode::kInvalidPlan,
                  "plugin fields are corrupted: reading past the end (byte " +
                      std::to_string(pos_) + " of " + std::to_string(n_) + ")");
    }
  }
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t count(size_t itemBytes) {
    uint32_t c = get<uint32_t>();
    need(static_cast<size_t>(c) * itemBytes);
    return c;
  }
  std::string str() {
    uint32_t k = count(1);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), k);
    pos_ += k;
    return s;
  }
  const uint8_t* take(size_t k) {
    need(k);
    const uint8_t* at = p_ + pos_;
    pos_ += k;
    return at;
  }
  bool atEnd() const { return pos_ == n_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<uint8_t> PluginFields::serialize() const {
  Writer w;
  w.put(static_cast<uint32_t>(values_.size()));
  for (const auto& [name, value] : values_) {
    w.str(name);
    w.put(static_cast<uint8_t>(value.index()));
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, float>) {
            w.put(v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            w.str(v);
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            w.put(static_cast<uint32_t>(v.size()));
            for (const auto& s : v) w.str(s);
          } else if constexpr (std::is_same_v<T, Tensor>) {
            w.put(static_cast<int32_t>(v.dtype()));
            w.put(static_cast<uint32_t>(v.rank()));
            for (int64_t d : v.shape()) w.put(d);
            if (v.dtype() == DataType::kString) {
              for (int64_t i = 0; i < v.numel(); ++i) w.str(v.template data<std::string>()[i]);
            } else {
              w.raw(v.raw(), v.byteSize());
            }
          } else {
            w.put(static_cast<uint32_t>(v.size()));
            w.raw(v.data(), v.size() * sizeof(v[0]));
          }
        },
        value);
  }
  return std::move(w.bytes);
}

PluginFields PluginFields::deserialize(const void* data, size_t size) {
  if (!data && size) throw Error(ErrorCode::kInvalidPlan, "plugin fields are corrupted: no data");
  Reader r(static_cast<const uint8_t*>(data), size);
  PluginFields fields;
  const uint32_t n = r.count(6);
  for (uint32_t i = 0; i < n; ++i) {
    std::string name = r.str();
    const uint8_t kind = r.get<uint8_t>();
    switch (static_cast<PluginFieldType>(kind)) {
      case PluginFieldType::kINT:
        fields.set(name, r.get<int64_t>());
        break;
      case PluginFieldType::kFLOAT:
        fields.set(name, r.get<float>());
        break;
      case PluginFieldType::kSTRING:
        fields.set(name, r.str());
        break;
      case PluginFieldType::kINTS: {
        std::vector<int64_t> v(r.count(8));
        std::memcpy(v.data(), r.take(v.size() * 8), v.size() * 8);
        fields.set(name, std::move(v));
        break;
      }
      case PluginFieldType::kFLOATS: {
        std::vector<float> v(r.count(4));
        std::memcpy(v.data(), r.take(v.size() * 4), v.size() * 4);
        fields.set(name, std::move(v));
        break;
      }
      case PluginFieldType::kSTRINGS: {
        std::vector<std::string> v(r.count(4));
        for (auto& s : v) s = r.str();
        fields.set(name, std::move(v));
        break;
      }
      case PluginFieldType::kTENSOR: {
        auto dtype = static_cast<DataType>(r.get<int32_t>());
        if (!isSupportedDataType(dtype)) {
          throw Error(ErrorCode::kInvalidPlan, "plugin field '" + name +
                                                   "' is corrupted: data type code " +
                                                   std::to_string(static_cast<int>(dtype)));
        }
        Shape shape(r.count(8));
        int64_t numel = 1;
        for (int64_t& d : shape) {
          d = r.get<int64_t>();
          if (d < 0 || (d > 0 && numel > (int64_t{1} << 40) / d)) {
            throw Error(ErrorCode::kInvalidPlan,
                        "plugin field '" + name + "' is corrupted: dim " + std::to_string(d));
          }
          numel *= d;
        }
        if (dtype != DataType::kString) r.need(static_cast<size_t>(numel) * dataTypeSize(dtype));
        Tensor t(dtype, shape);
        if (dtype == DataType::kString) {
          for (int64_t k = 0; k < numel; ++k) t.data<std::string>()[k] = r.str();
        } else {
          std::memcpy(t.raw(), r.take(t.byteSize()), t.byteSize());
        }
        fields.set(name, std::move(t));
        break;
      }
      default:
        throw Error(ErrorCode::kInvalidPlan,
                    "plugin field '" + name + "' is corrupted: type code " + std::to_string(kind));
    }
  }
  if (!r.atEnd())
    throw Error(ErrorCode::kInvalidPlan,
                "plugin fields are corrupted: unexpected bytes at the end");
  return fields;
}

PluginFields PluginFields::fromJson(const std::string& text) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.empty() ? std::string("{}") : text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("plugin info is not valid JSON: ") + e.what());
  }
  if (!json.is_object())
    throw Error(ErrorCode::kInvalidArgument, "plugin info must be a JSON object, got: " + text);
  PluginFields fields;
  for (const auto& item : json.items()) {
    const std::string& name = item.key();  // not a structured binding: clang 14 cannot capture one
    const nlohmann::json& v = item.value();
    auto bad = [&] {
      throw Error(ErrorCode::kInvalidArgument,
                  "plugin info member '" + name + "' is " + v.dump() +
                      ": expected a number, a string, or an array of numbers or of strings");
    };
    if (v.is_boolean()) {
      fields.set(name, int64_t{v.get<bool>() ? 1 : 0});
    } else if (v.is_number_integer()) {
      fields.set(name, v.get<int64_t>());
    } else if (v.is_number()) {
      fields.set(name, v.get<float>());
    } else if (v.is_string()) {
      fields.set(name, v.get<std::string>());
    } else if (v.is_array()) {
      bool allInts = true, allNumbers = true, allStrings = true;
      for (const auto& e : v) {
        allInts = allInts && e.is_number_integer();
        allNumbers = allNumbers && e.is_number();
        allStrings = allStrings && e.is_string();
      }
      if (v.empty() || allInts)
        fields.set(name, v.get<std::vector<int64_t>>());
      else if (allNumbers)
        fields.set(name, v.get<std::vector<float>>());
      else if (allStrings)
        fields.set(name, v.get<std::vector<std::string>>());
      else
        bad();
    } else {
      bad();
    }
  }
  return fields;
}

}  // namespace kiln
