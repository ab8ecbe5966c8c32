#include "layer_profile.h"

#include <algorithm>
#include <iomanip>
#include <numeric>

namespace kiln::cli {

void LayerProfile::reportLayerTime(const LayerTiming& timing) {
  auto [it, added] =
      index_.try_emplace({timing.name, timing.opType, timing.shapes}, layers_.size());
  if (added) layers_.push_back({timing.name, timing.opType, timing.shapes, 0});
  layers_[it->second].totalMs += timing.ms;
}

void LayerProfile::clear() {
  layers_.clear();
  index_.clear();
}

void LayerProfile::print(std::ostream& out, int runs, size_t top) const {
  const double total = std::accumulate(layers_.begin(), layers_.end(), 0.0,
                                       [](double sum, const Layer& l) { return sum + l.totalMs; });
  if (runs <= 0 || total <= 0) return;
  std::vector<const Layer*> byTime;
  for (const Layer& l : layers_) byTime.push_back(&l);
  std::stable_sort(byTime.begin(), byTime.end(),
                   [](const Layer* a, const Layer* b) { return a->totalMs > b->totalMs; });
  out << std::fixed << "per-layer profile, mean ms per run over " << runs << " runs ("
      << layers_.size() << " layers, " << std::setprecision(3) << total / runs
      << " ms in layers):\n";
  out << "      ms      %  op                    layer / input shapes\n";
  for (size_t i = 0; i < std::min(top, byTime.size()); ++i) {
    const Layer& l = *byTime[i];
    out << std::setw(8) << std::setprecision(3) << l.totalMs / runs << std::setw(7)
        << std::setprecision(1) << 100.0 * l.totalMs / total << "  " << std::left << std::setw(22)
        << l.opType << std::right << l.name << "  [" << l.shapes << "]\n";
  }
  std::map<std::string, std::pair<double, int>> perOp;
  for (const Layer& l : layers_) {
    perOp[l.opType].first += l.totalMs;
    ++perOp[l.opType].second;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> ops(perOp.begin(), perOp.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  out << "per operator:\n      ms      %  layers  op\n";
  for (const auto& [op, entry] : ops) {
    out << std::setw(8) << std::setprecision(3) << entry.first / runs << std::setw(7)
        << std::setprecision(1) << 100.0 * entry.first / total << std::setw(8) << entry.second
        << "  " << op << "\n";
  }
}

nlohmann::json LayerProfile::toJson(int runs) const {
  nlohmann::json layers = nlohmann::json::array();
  for (const Layer& l : layers_) {
    layers.push_back({{"name", l.name},
                      {"op", l.opType},
                      {"input_shapes", l.shapes},
                      {"mean_ms", runs > 0 ? l.totalMs / runs : 0.0}});
  }
  return layers;
}

}  // namespace kiln::cli
