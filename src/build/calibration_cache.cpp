#include "build/calibration_cache.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include "kiln/error.h"

namespace kiln::build {

namespace {

constexpr const char* kMagic = "kiln-int8-calibration";

[[noreturn]] void malformed(int line, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument,
              "calibration cache line " + std::to_string(line) + ": " + message);
}

std::string hexBits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", bits);
  return text;
}

bool parseHexBits(const std::string& text, float& v) {
  if (text.size() != 8 || text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    return false;
  const uint32_t bits = static_cast<uint32_t>(std::stoul(text, nullptr, 16));
  std::memcpy(&v, &bits, sizeof(v));
  return true;
}

CalibrationAlgoType algorithmNamed(const std::string& name, int line) {
  for (auto algo :
       {CalibrationAlgoType::kENTROPY_CALIBRATION_2, CalibrationAlgoType::kMINMAX_CALIBRATION,
        CalibrationAlgoType::kPERCENTILE_CALIBRATION}) {
    if (name == calibrationAlgoName(algo)) return algo;
  }
  malformed(line, "unknown calibrator '" + name + "' (entropy, minmax or percentile)");
}

}  // namespace

std::string formatCalibrationCache(const CalibrationCache& cache) {
  std::ostringstream os;
  os << kMagic << " calibrator=" << calibrationAlgoName(cache.algorithm)
     << " kiln=" << cache.kilnVersion << " network=" << cache.fingerprint << "\n";
  for (const ActivationQuantization& t : cache.tensors) {
    os << t.tensor << ": " << hexBits(t.scale);
    if (t.zeroPoint != 0) os << " " << t.zeroPoint;
    os << "\n";
  }
  return os.str();
}

CalibrationCache parseCalibrationCache(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line.rfind(kMagic, 0) != 0) {
    malformed(1, std::string("not a kiln calibration cache (the first line must start with '") +
                     kMagic + "')");
  }
  CalibrationCache cache;
  std::map<std::string, std::string> fields;
  std::istringstream header(line.substr(std::strlen(kMagic)));
  for (std::string field; header >> field;) {
    const size_t eq = field.find('=');
    if (eq == std::string::npos) malformed(1, "header field '" + field + "' is not key=value");
    fields[field.substr(0, eq)] = field.substr(eq + 1);
  }
  for (const char* key : {"calibrator", "kiln", "network"})
    if (!fields.count(key)) malformed(1, std::string("the header has no ") + key + "=");
  cache.algorithm = algorithmNamed(fields["calibrator"], 1);
  cache.kilnVersion = fields["kiln"];
  cache.fingerprint = fields["network"];
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const size_t colon = line.rfind(": ");
    if (colon == std::string::npos || colon == 0)
      malformed(number, "expected 'tensor_name: SCALE_HEX [ZERO_POINT]'");
    ActivationQuantization t;
    t.tensor = line.substr(0, colon);
    std::istringstream rest(line.substr(colon + 2));
    std::string scale;
    rest >> scale;
    if (!parseHexBits(scale, t.scale))
      malformed(number,
                "scale '" + scale + "' of '" + t.tensor + "' is not 8 hex digits (float bits)");
    if (!(t.scale > 0)) malformed(number, "scale of '" + t.tensor + "' is not positive");
    if (!(rest >> std::ws).eof()) {
      if (!(rest >> t.zeroPoint) || t.zeroPoint < -128 || t.zeroPoint > 127 ||
          !(rest >> std::ws).eof()) {
        malformed(number, "zero point of '" + t.tensor + "' is not an integer in [-128, 127]");
      }
    }
    cache.tensors.push_back(std::move(t));
  }
  return cache;
}

std::vector<ActivationQuantization> matchCalibrationCache(const CalibrationCache& cache,
                                                          const ir::Graph& graph,
                                                          const std::vector<int>& tensors,
                                                          const std::string& fingerprint) {
  std::map<std::string, const ActivationQuantization*> byName;
  for (const ActivationQuantization& t : cache.tensors) byName[t.tensor] = &t;
  const std::string refused =
      "the calibration cache was made for another network (its fingerprint " + cache.fingerprint +
      ", this network's " + fingerprint + "): ";
  std::vector<ActivationQuantization> out;
  for (int id : tensors) {
    const std::string& name = graph.value(id).name;
    auto it = byName.find(name);
    if (it == byName.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  refused + "tensor '" + name + "', which this network quantizes, is not in it");
    }
    out.push_back(*it->second);
  }
  if (cache.tensors.size() != tensors.size()) {
    std::map<std::string, int> wanted;
    for (int id : tensors) wanted[graph.value(id).name] = id;
    for (const ActivationQuantization& t : cache.tensors) {
      if (!wanted.count(t.tensor)) {
        throw Error(ErrorCode::kInvalidArgument,
                    refused + "its tensor '" + t.tensor + "' is not quantized in this network");
      }
    }
  }
  if (cache.fingerprint != fingerprint) {
    throw Error(
        ErrorCode::kInvalidArgument,
        refused +
            "it has the same tensors, but the quantized layers or the tensors' shapes differ");
  }
  return out;
}

}  // namespace kiln::build
