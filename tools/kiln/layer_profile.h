// `kiln bench --profile`: per-layer times summed over the timed runs (like trtexec --dumpProfile).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/profiler.h"

namespace kiln::cli {

class LayerProfile : public IProfiler {
 public:
  void reportLayerTime(const LayerTiming& timing) override;
  /// Forgets everything reported so far (the warm-up runs).
  void clear();
  /// The `top` slowest layers, then the time per operator, as mean ms per run over `runs`.
  void print(std::ostream& out, int runs, size_t top) const;
  nlohmann::json toJson(int runs) const;

 private:
  struct Layer {
    std::string name, opType, shapes;
    double totalMs = 0;
  };
  std::vector<Layer> layers_;  // in first-run order
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index_;
};

}  // namespace kiln::cli
