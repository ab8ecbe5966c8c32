#include "build/profiles.h"

#include <algorithm>

#include "kiln/error.h"

namespace kiln::build {

namespace {

const char* selectorName(int k) { return k == 0 ? "min" : k == 1 ? "opt" : "max"; }

[[noreturn]] void reject(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

std::string dimsText(const ir::TypeInfo& type) {
  return type.shape ? ir::symShapeToString(*type.shape) : std::string("rank unknown");
}

bool isDynamic(const ir::TypeInfo& type) {
  if (!type.shape) return true;
  return std::any_of(type.shape->begin(), type.shape->end(),
                     [](const ir::Dim& d) { return !d.isKnown(); });
}

plan::ProfileEntry resolveEntry(const ir::Value& input, const OptimizationProfile& profile,
                                int index) {
  const std::string where =
      "optimization profile " + std::to_string(index) + ", input '" + input.name + "'";
  plan::ProfileEntry e;
  e.input = input.name;
  int given = 0;
  for (int k = 0; k < 3; ++k) {
    e.dims[k] = profile.getDimensions(input.name, static_cast<OptProfileSelector>(k));
    given += !e.dims[k].empty();
    e.values[k] = profile.getShapeValues(input.name, static_cast<OptProfileSelector>(k));
  }
  const bool dynamic = isDynamic(input.type) && !input.constant;
  if (given == 0) {
    if (dynamic) {
      reject("input '" + input.name + "' has dynamic dims (" + dimsText(input.type) +
             ") but optimization profile " + std::to_string(index) +
             " does not set its min/opt/max dims");
    }
    Shape fixed = input.constant ? input.constant->shape() : *ir::concreteShape(*input.type.shape);
    for (auto& d : e.dims) d = fixed;
  } else if (given < 3) {
    for (int k = 0; k < 3; ++k) {
      if (e.dims[k].empty())
        reject(where + ": the " + std::string(selectorName(k)) +
               " dims are not set (set min, opt and max)");
    }
  }
  for (int k = 0; k < 3; ++k) {
    if (e.dims[k].size() != e.dims[0].size()) {
      reject(where + ": min has rank " + std::to_string(e.dims[0].size()) + " but " +
             selectorName(k) + " has rank " + std::to_string(e.dims[k].size()));
    }
  }
  if (input.type.shape && e.dims[0].size() != input.type.shape->size()) {
    reject(where + ": the profile's dims have rank " + std::to_string(e.dims[0].size()) +
           " but the network's input has rank " + std::to_string(input.type.shape->size()) + " (" +
           dimsText(input.type) + ")");
  }
  for (size_t i = 0; i < e.dims[0].size(); ++i) {
    const int64_t lo = e.dims[0][i], opt = e.dims[1][i], hi = e.dims[2][i];
    const std::string at = where + ", index " + std::to_string(i) + ": ";
    if (lo < 0) reject(at + "min " + std::to_string(lo) + " is negative");
    if (lo > opt)
      reject(at + "min " + std::to_string(lo) + " is greater than opt " + std::to_string(opt));
    if (opt > hi)
      reject(at + "opt " + std::to_string(opt) + " is greater than max " + std::to_string(hi));
    if (input.type.shape && (*input.type.shape)[i].isKnown()) {
      const int64_t fixed = (*input.type.shape)[i].value;
      if (lo != fixed || opt != fixed || hi != fixed) {
        reject(at + "the network fixes this dim to " + std::to_string(fixed) +
               " but the profile's min/opt/max are " + std::to_string(lo) + "/" +
               std::to_string(opt) + "/" + std::to_string(hi));
      }
    }
  }
  if (!e.values[0].empty() || !e.values[1].empty() || !e.values[2].empty()) {
    for (int k = 0; k < 3; ++k) {
      if (e.values[k].size() != e.values[0].size() || e.values[k].empty()) {
        reject(where + ": shape values need min, opt and max of the same length");
      }
    }
    for (size_t i = 0; i < e.values[0].size(); ++i) {
      if (e.values[0][i] > e.values[1][i] || e.values[1][i] > e.values[2][i]) {
        reject(where + ", shape value " + std::to_string(i) + ": min/opt/max " +
               std::to_string(e.values[0][i]) + "/" + std::to_string(e.values[1][i]) + "/" +
               std::to_string(e.values[2][i]) + " are not in order");
      }
    }
  }
  return e;
}

}  // namespace

std::vector<plan::Profile> resolveProfiles(const ir::Graph& graph, const BuilderConfig& config) {
  std::vector<OptimizationProfile> given;
  for (int p = 0; p < config.getNbOptimizationProfiles(); ++p)
    given.push_back(config.getOptimizationProfile(p));
  if (given.empty()) {
    for (int id : graph.inputs) {
      const ir::Value& v = graph.value(id);
      if (isDynamic(v.type) && !v.constant) {
        reject("input '" + v.name + "' has dynamic dims (" + dimsText(v.type) +
               ") but the builder config has no optimization profile; add one with min/opt/max "
               "dims for it");
      }
    }
    given.emplace_back();
  }
  std::vector<plan::Profile> profiles;
  for (size_t p = 0; p < given.size(); ++p) {
    for (const std::string& name : given[p].inputNames()) {
      int id = graph.findValue(name);
      if (id == ir::kNoValue || !graph.isGraphInput(id)) {
        std::string names;
        for (int in : graph.inputs) names += (names.empty() ? "" : ", ") + graph.value(in).name;
        reject("optimization profile " + std::to_string(p) + " sets dims for '" + name +
               "', which is not an input of the network (inputs: " + names + ")");
      }
    }
    plan::Profile profile;
    for (int id : graph.inputs)
      profile.entries.push_back(resolveEntry(graph.value(id), given[p], static_cast<int>(p)));
    profiles.push_back(std::move(profile));
  }
  return profiles;
}

std::map<int, Shape> profileShapes(const ir::Graph& graph, const plan::Profile& profile,
                                   OptProfileSelector which) {
  std::map<int, Shape> shapes;
  for (const plan::ProfileEntry& e : profile.entries)
    shapes[graph.findValue(e.input)] = e.dims[static_cast<int>(which)];
  return shapes;
}

}  // namespace kiln::build
