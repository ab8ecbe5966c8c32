// Serializes a Plan: header, section table, sections; tensor data goes to the weights section
// (large float constants and the kernels' packed blobs to the packed section), each blob 64-byte
// aligned in the file so that it can be memory-mapped in place.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/plan_bytes.h"
#include "engine/plan_format.h"
#include "engine/plan_plugins.h"

namespace kiln::plan {

namespace {

class GraphWriter {
 public:
  GraphWriter(ByteWriter& weights, ByteWriter& packed) : weights_(weights), packed_(packed) {}

  void graph(ByteWriter& w, const ir::Graph& g) {
    w.str(g.name);
    w.u32(static_cast<uint32_t>(g.values.size()));
    for (const ir::Value& v : g.values) {
      w.str(v.name);
      w.i32(static_cast<int32_t>(v.type.dtype));
      // bit 1: a sequence, bit 2: an optional, bit 3: a map (or sequence of maps), its key type
      // next
      const bool isMap = v.type.mapKeyType != DataType::kUndefined;
      w.u8(static_cast<uint8_t>(v.type.shape.has_value() | (v.type.isSequence << 1) |
                                (v.type.isOptional << 2) | (isMap << 3)));
      if (isMap) w.i32(static_cast<int32_t>(v.type.mapKeyType));
      if (v.type.shape) {
        w.u32(static_cast<uint32_t>(v.type.shape->size()));
        for (const ir::Dim& d : *v.type.shape) {
          w.i64(d.value);
          w.str(d.symbol);
        }
      }
      w.u8(v.constant.has_value());
      if (v.constant) tensor(w, *v.constant);
    }
    ids(w, g.inputs);
    ids(w, g.outputs);
    ids(w, g.outerInputs);
    w.u32(static_cast<uint32_t>(g.nodes.size()));
    for (const ir::Node& n : g.nodes) {
      w.str(n.name);
      w.str(n.opType);
      w.str(n.domain);
      w.i64(n.opset);
      ids(w, n.inputs);
      ids(w, n.outputs);
      w.i32(n.explicitInputs);
      w.u32(static_cast<uint32_t>(n.attrs.size()));
      for (const auto& [name, attr] : n.attrs) {
        w.str(name);
        attribute(w, attr);
      }
    }
  }

 private:
  static void ids(ByteWriter& w, const std::vector<int>& v) {
    w.u32(static_cast<uint32_t>(v.size()));
    for (int id : v) w.i32(id);
  }

  void tensor(ByteWriter& w, const Tensor& t) {
    w.i32(static_cast<int32_t>(t.dtype()));
    w.i64s(t.shape());
    if (t.dtype() == DataType::kString) {
      for (int64_t i = 0; i < t.numel(); ++i) w.str(t.data<std::string>()[i]);
      return;
    }
    if (!t.raw() && t.byteSize()) {  // a constant only its readers' packed copies hold
      w.u8(static_cast<uint8_t>(TensorStorage::kNone));
      w.u64(0);
      w.u64(0);
      return;
    }
    const bool floats = t.dtype() == DataType::kFloat32 || t.dtype() == DataType::kFloat16 ||
                        t.dtype() == DataType::kBFloat16 || t.dtype() == DataType::kFloat64;
    const bool packed = floats && t.numel() > kLargestShapeLikeConstant;
    ByteWriter& section = packed ? packed_ : weights_;
    w.u8(static_cast<uint8_t>(packed ? TensorStorage::kPacked : TensorStorage::kWeights));
    section.alignTo(kWeightAlignment);
    w.u64(section.size());
    w.u64(t.byteSize());
    section.raw(t.raw(), t.byteSize());
  }

  void attribute(ByteWriter& w, const ir::Attribute& a) {
    w.u8(static_cast<uint8_t>(a.index()));
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>)
            w.i64(v);
          else if constexpr (std::is_same_v<T, float>)
            w.f32(v);
          else if constexpr (std::is_same_v<T, std::string>)
            w.str(v);
          else if constexpr (std::is_same_v<T, Tensor>)
            tensor(w, v);
          else if constexpr (std::is_same_v<T, std::shared_ptr<ir::Graph>>)
            graph(w, *v);
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            w.i64s(v);
          else if constexpr (std::is_same_v<T, std::vector<float>>) {
            w.u32(static_cast<uint32_t>(v.size()));
            for (float x : v) w.f32(x);
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            w.u32(static_cast<uint32_t>(v.size()));
            for (const auto& s : v) w.str(s);
          } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
            w.u32(static_cast<uint32_t>(v.size()));
            for (const auto& t : v) tensor(w, t);
          } else {
            w.u32(static_cast<uint32_t>(v.size()));
            for (const auto& g : v) graph(w, *g);
          }
        },
        a);
  }

  ByteWriter& weights_;
  ByteWriter& packed_;
};

void writeBuildInfo(ByteWriter& w, const PlanInfo& info) {
  w.str(info.kilnVersion);
  w.i32(info.threads);
  w.u64(info.workspaceBytes);
  w.u32(info.builderFlags);
  w.i32(info.layersBefore);
  w.i32(info.layersAfter);
  w.u64(info.arenaBytes);
  w.str(info.source);
  w.i32(info.builderOptimizationLevel);
}

void writeIO(ByteWriter& w, const std::vector<IOTensor>& io) {
  w.u32(static_cast<uint32_t>(io.size()));
  for (const IOTensor& t : io) {
    w.str(t.name);
    w.u8(static_cast<uint8_t>(t.mode));
    w.i32(static_cast<int32_t>(t.dtype));
    w.u8(t.hasShape);
    w.i64s(t.dims);
    w.u8(t.hasDefault);
    w.i32(t.valueId);
  }
}

void writeProfiles(ByteWriter& w, const std::vector<Profile>& profiles) {
  w.u32(static_cast<uint32_t>(profiles.size()));
  for (const Profile& p : profiles) {
    w.u32(static_cast<uint32_t>(p.entries.size()));
    for (const ProfileEntry& e : p.entries) {
      w.str(e.input);
      for (const Shape& d : e.dims) w.i64s(d);
      for (const auto& v : e.values) w.i64s(v);
    }
  }
}

// A layer's kernel state: its parameters, then each packed blob 64-byte aligned in the packed
// section.
void writeKernelState(ByteWriter& w, ByteWriter& packed, const cpu::KernelState* state) {
  w.str(state ? std::string(state->params.begin(), state->params.end()) : std::string());
  w.u32(state ? static_cast<uint32_t>(state->blobs.size()) : 0);
  if (!state) return;
  for (const cpu::KernelBlob& blob : state->blobs) {
    packed.alignTo(kWeightAlignment);
    w.u64(packed.size());
    w.u64(blob.bytes);
    packed.raw(blob.data, blob.bytes);
  }
}

void writeLayers(ByteWriter& w, ByteWriter& packed, const std::vector<LayerInfo>& layers,
                 const std::vector<cpu::KernelState>& states) {
  w.u32(static_cast<uint32_t>(layers.size()));
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerInfo& l = layers[i];
    w.str(l.name);
    w.str(l.type);
    w.str(l.kernel);
    w.str(l.kernelIsa);
    w.u32(static_cast<uint32_t>(l.declinedKernels.size()));
    for (const auto& s : l.declinedKernels) w.str(s);
    w.u32(static_cast<uint32_t>(l.fusedFrom.size()));
    for (const auto& s : l.fusedFrom) w.str(s);
    w.str(l.kernelChoice);
    w.u32(static_cast<uint32_t>(l.tactics.size()));
    for (const TacticTiming& t : l.tactics) {
      w.str(t.kernel);
      w.f64(t.milliseconds);
      w.str(t.note);
    }
    writeKernelState(w, packed, i < states.size() ? &states[i] : nullptr);
  }
}

void putAt(std::vector<uint8_t>& bytes, size_t offset, const void* v, size_t n) {
  std::memcpy(&bytes[offset], v, n);
}

}  // namespace

std::vector<uint8_t> writePlan(const Plan& plan) {
  ByteWriter weights, packed;
  ByteWriter buildInfo, io, profiles, graph, layers, pluginRecords;
  writeBuildInfo(buildInfo, plan.info);
  writeIO(io, plan.io);
  writeProfiles(profiles, plan.profiles);
  GraphWriter(weights, packed).graph(graph, *plan.graph);
  writeLayers(layers, packed, plan.layers, plan.kernelStates);
  std::vector<std::pair<uint32_t, const std::vector<uint8_t>*>> sections = {
      {kBuildInfoSection, &buildInfo.bytes()}, {kIOSection, &io.bytes()},
      {kProfilesSection, &profiles.bytes()},   {kGraphSection, &graph.bytes()},
      {kLayersSection, &layers.bytes()},       {kWeightsSection, &weights.bytes()}};
  // The plugins section is written only when needed, so plans without plugins stay readable by
  // a kiln that predates it.
  if (hasPluginNodes(*plan.graph)) {
    writePlugins(pluginRecords, *plan.graph);
    sections.emplace_back(kPluginsSection, &pluginRecords.bytes());
  }
  sections.emplace_back(kPackedSection,
                        &packed.bytes());  // last: the header checksum stops before it
  const auto count = static_cast<uint32_t>(sections.size());

  ByteWriter file;
  file.raw(kMagic, sizeof(kMagic));
  file.u32(kFormatVersion);
  file.u32(kHeaderSize);
  char version[16] = {};
  std::strncpy(version, kKilnVersion, sizeof(version) - 1);
  file.raw(version, sizeof(version));
  file.u32(plan.cpuFeatures);
  file.u32(count);        // section count
  file.u64(0);            // file size, patched below
  file.u64(kHeaderSize);  // section table offset
  file.u32(0);            // reserved
  file.u32(0);            // checksum, patched below
  const size_t table = file.size();
  file.bytes().resize(table + count * 24);
  for (uint32_t s = 0; s < count; ++s) {
    const auto& [id, body] = sections[s];
    file.alignTo(kWeightAlignment);
    const uint64_t offset = file.size();
    const uint64_t size = body->size();
    file.raw(body->data(), body->size());
    // The packed section's own checksum sits in its entry, which the header checksum covers.
    const uint32_t sectionChecksum = id == kPackedSection ? crc32c(body->data(), body->size()) : 0;
    const size_t entry = table + static_cast<size_t>(s) * 24;
    putAt(file.bytes(), entry, &id, 4);
    putAt(file.bytes(), entry + 4, &sectionChecksum, 4);
    putAt(file.bytes(), entry + 8, &offset, 8);
    putAt(file.bytes(), entry + 16, &size, 8);
  }
  std::vector<uint8_t> bytes = std::move(file.bytes());
  uint64_t total = bytes.size();
  putAt(bytes, 40, &total, 8);
  signPlan(bytes);
  return bytes;
}

uint32_t headerChecksum(const uint8_t* plan, uint64_t packedOffset) {
  const uint32_t crc = crc32c(plan, kChecksumOffset);
  return crc32c(plan + kHeaderSize, packedOffset - kHeaderSize, crc);
}

void signPlan(std::vector<uint8_t>& plan) {
  // Tests sign damaged plans too: only table entries inside the bytes are read, and a packed
  // offset outside them signs up to the end.
  uint32_t count = 0;
  std::memcpy(&count, &plan[36], 4);
  const uint64_t entries = std::min<uint64_t>(count, (plan.size() - kHeaderSize) / 24);
  uint64_t packedOffset = plan.size();
  for (uint64_t s = 0; s < entries; ++s) {
    uint32_t id = 0;
    std::memcpy(&id, &plan[kHeaderSize + s * 24], 4);
    if (id == kPackedSection) std::memcpy(&packedOffset, &plan[kHeaderSize + s * 24 + 8], 8);
  }
  if (packedOffset < kHeaderSize || packedOffset > plan.size()) packedOffset = plan.size();
  const uint32_t crc = headerChecksum(plan.data(), packedOffset);
  putAt(plan, kChecksumOffset, &crc, 4);
}

bool looksLikePlan(const void* data, size_t size) {
  return size >= sizeof(kMagic) && std::memcmp(data, kMagic, sizeof(kMagic)) == 0;
}

const ProfileEntry* Profile::find(const std::string& input) const {
  for (const ProfileEntry& e : entries)
    if (e.input == input) return &e;
  return nullptr;
}

}  // namespace kiln::plan
