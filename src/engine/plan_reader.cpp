// Reads a plan, trusting nothing: the header is checked first (size, magic, format version,
// checksums, CPU features), then every section bound, count, id and tensor size.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include "core/aligned_memory.h"
#include "core/bool_bytes.h"
#include "core/tensor_limits.h"
#include "engine/plan_bytes.h"
#include "engine/plan_format.h"
#include "engine/plan_plugins.h"
#include "ir/precision.h"

namespace kiln::plan {

namespace {

constexpr int kMaxSubgraphDepth = 32;

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidPlan, message);
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

struct Section {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool present = false;
};

const char* sectionName(uint32_t id) {
  switch (id) {
    case kBuildInfoSection:
      return "build info";
    case kIOSection:
      return "inputs and outputs";
    case kProfilesSection:
      return "profiles";
    case kGraphSection:
      return "graph";
    case kLayersSection:
      return "layers";
    case kWeightsSection:
      return "weights";
    case kPluginsSection:
      return "plugins";
    case kPackedSection:
      return "packed weights";
  }
  return "unknown";
}

class GraphReader {
 public:
  GraphReader(const uint8_t* data, Section weights, Section packed,
              std::shared_ptr<const void> owner)
      : data_(data), weights_(weights), packed_(packed), owner_(std::move(owner)) {}

  std::shared_ptr<ir::Graph> graph(ByteReader& r, int depth) {
    if (depth > kMaxSubgraphDepth)
      r.fail("subgraphs are nested more than " + std::to_string(kMaxSubgraphDepth) + " deep");
    auto g = std::make_shared<ir::Graph>();
    g->name = r.str("graph name");
    const uint32_t numValues = r.count("value", 10);
    g->values.reserve(numValues);
    for (uint32_t i = 0; i < numValues; ++i) {
      ir::Value v;
      v.name = r.str("value name");
      v.type.dtype = dtype(r, true);
      // bit 0: has a shape, bit 1: a sequence, bit 2: an optional, bit 3: a map (key type next)
      const uint8_t typeFlags = r.u8("shape flag");
      if (typeFlags > 15)
        r.fail("value '" + v.name + "' has type flags " + std::to_string(typeFlags));
      v.type.isSequence = (typeFlags & 2) != 0;
      v.type.isOptional = (typeFlags & 4) != 0;
      if (typeFlags & 8) {
        v.type.mapKeyType = dtype(r, false);
        if (v.type.mapKeyType != DataType::kInt64 && v.type.mapKeyType != DataType::kString) {
          r.fail("value '" + v.name + "' is a map with " + dataTypeName(v.type.mapKeyType) +
                 " keys");
        }
      }
      if (typeFlags & 1) {
        uint32_t rank = r.count("rank", 12);
        if (rank > kMaxTensorRank)
          r.fail("value '" + v.name + "' has rank " + std::to_string(rank));
        ir::SymShape shape;
        for (uint32_t k = 0; k < rank; ++k) {
          int64_t value = r.i64("dim");
          std::string symbol = r.str("dim symbol");
          if (value < -1) r.fail("value '" + v.name + "' has dim " + std::to_string(value));
          shape.push_back(ir::Dim{value, std::move(symbol)});
        }
        v.type.shape = std::move(shape);
      }
      if (r.u8("constant flag")) v.constant = tensor(r);
      if (!g->valueIds.emplace(v.name, static_cast<int>(i)).second)
        r.fail("tensor name '" + v.name + "' appears twice");
      g->values.push_back(std::move(v));
    }
    g->inputs = ids(r, numValues, false, "graph input");
    g->outputs = ids(r, numValues, false, "graph output");
    g->outerInputs = ids(r, numValues, true, "outer-scope input");
    if (depth == 0 && !g->outerInputs.empty()) r.fail("the main graph has outer-scope inputs");
    const uint32_t numNodes = r.count("node", 28);
    g->nodes.reserve(numNodes);
    for (uint32_t i = 0; i < numNodes; ++i) {
      ir::Node n;
      n.name = r.str("node name");
      n.opType = r.str("op type");
      n.domain = r.str("domain");
      n.opset = r.i64("opset");
      n.inputs = ids(r, numValues, true, "node input");
      n.outputs = ids(r, numValues, true, "node output");
      n.explicitInputs = r.i32("explicit input count");
      if (n.explicitInputs < -1 || n.explicitInputs > static_cast<int>(n.inputs.size())) {
        r.fail("node '" + n.name + "' has an explicit input count out of range");
      }
      const uint32_t numAttrs = r.count("attribute", 5);
      for (uint32_t k = 0; k < numAttrs; ++k) {
        std::string name = r.str("attribute name");
        ir::Attribute a = attribute(r, depth);
        if (!n.attrs.emplace(name, std::move(a)).second)
          r.fail("node '" + n.name + "' has attribute '" + name + "' twice");
      }
      g->nodes.push_back(std::move(n));
    }
    try {
      ir::sortTopologically(*g);
      ir::verifyGraph(*g);
    } catch (const Error& e) {
      r.fail(std::string("its graph is invalid: ") + e.what());
    }
    return g;
  }

 private:
  static DataType dtype(ByteReader& r, bool allowUndefined) {
    int32_t code = r.i32("data type");
    auto t = static_cast<DataType>(code);
    if (code < 0 || code > static_cast<int>(DataType::kInt2) ||
        (t == DataType::kUndefined ? !allowUndefined : !isSupportedDataType(t))) {
      r.fail("data type code " + std::to_string(code) + " is not valid");
    }
    return t;
  }

  static std::vector<int> ids(ByteReader& r, uint32_t numValues, bool allowNone, const char* what) {
    uint32_t n = r.count(what, 4);
    std::vector<int> v(n);
    for (int& id : v) {
      id = r.i32(what);
      if ((id < 0 && !(allowNone && id == ir::kNoValue)) ||
          (id >= 0 && static_cast<uint32_t>(id) >= numValues)) {
        r.fail(std::string(what) + " refers to tensor id " + std::to_string(id) + " of " +
               std::to_string(numValues));
      }
    }
    return v;
  }

  Tensor tensor(ByteReader& r) {
    DataType t = dtype(r, false);
    Shape shape = r.i64s("tensor dims");
    if (shape.size() > kMaxTensorRank) r.fail("a tensor has rank " + std::to_string(shape.size()));
    for (int64_t d : shape)
      if (d < 0) r.fail("a tensor has dim " + std::to_string(d));
    int64_t numel = 0;
    try {
      numel = shapeNumel(shape);
    } catch (const Error&) {
      r.fail("tensor shape " + shapeToString(shape) + " is too large");
    }
    if (t == DataType::kString) {
      if (static_cast<uint64_t>(numel) > r.remaining() / 4)
        r.fail("string tensor " + shapeToString(shape) + " does not fit");
      Tensor s(t, shape);
      for (int64_t i = 0; i < numel; ++i) s.data<std::string>()[i] = r.str("string element");
      return s;
    }
    const uint8_t storage = r.u8("tensor storage");
    const uint64_t offset = r.u64("weight offset");
    const uint64_t bytes = r.u64("weight size");
    if (storage ==
        static_cast<uint8_t>(TensorStorage::kNone)) {  // kept only packed by its readers' kernels
      if (numel == 0) r.fail("an empty tensor is marked as left out");
      if (offset || bytes)
        r.fail("a tensor left out of the plan has weights at offset " + std::to_string(offset));
      return Tensor::wrap(t, shape, nullptr, nullptr);
    }
    const bool inPacked = storage == static_cast<uint8_t>(TensorStorage::kPacked);
    if (!inPacked && storage != static_cast<uint8_t>(TensorStorage::kWeights)) {
      r.fail("tensor storage code " + std::to_string(storage) + " is not valid");
    }
    const bool floats = t == DataType::kFloat32 || t == DataType::kFloat16 ||
                        t == DataType::kBFloat16 || t == DataType::kFloat64;
    // Only large float data may lie outside the header checksum (TensorStorage::kPacked).
    if (inPacked && (!floats || numel <= kLargestShapeLikeConstant)) {
      r.fail("tensor " + dataTypeName(t) + "[" + shapeToString(shape) +
             "] may not lie in the packed weights section");
    }
    const Section& section = inPacked ? packed_ : weights_;
    const char* sectionName = inPacked ? "packed weights" : "weights";
    if (static_cast<uint64_t>(numel) > section.size / dataTypeSize(t) + 1 ||
        bytes != static_cast<uint64_t>(numel) * dataTypeSize(t)) {
      r.fail("tensor " + dataTypeName(t) + "[" + shapeToString(shape) + "] has " +
             std::to_string(bytes) + " bytes of weights");
    }
    if (offset > section.size || bytes > section.size - offset) {
      r.fail("weights at offset " + std::to_string(offset) + " (" + std::to_string(bytes) +
             " bytes) lie outside the " + sectionName + " section of " +
             std::to_string(section.size) + " bytes");
    }
    const uint8_t* at = data_ + section.offset + offset;
    if (t == DataType::kBool) return boolsFromBytes(shape, at);
    // A mapped file is private copy-on-write memory: viewing it lets the kernel's packing read
    // the weights where they lie, and the pages of those it keeps packed are never copied.
    if (owner_ && bytes) return Tensor::wrap(t, shape, const_cast<uint8_t*>(at), owner_);
    Tensor out(t, shape);
    if (bytes) std::memcpy(out.raw(), at, bytes);
    return out;
  }

  ir::Attribute attribute(ByteReader& r, int depth) {
    uint8_t kind = r.u8("attribute kind");
    auto list = [&](auto readOne, size_t minBytes) {
      uint32_t n = r.count("attribute list", minBytes);
      std::vector<decltype(readOne())> v;
      v.reserve(n);
      for (uint32_t i = 0; i < n; ++i) v.push_back(readOne());
      return v;
    };
    switch (kind) {
      case 0:
        return r.i64("int attribute");
      case 1:
        return r.f32("float attribute");
      case 2:
        return r.str("string attribute");
      case 3:
        return tensor(r);
      case 4:
        return graph(r, depth + 1);
      case 5:
        return r.i64s("ints attribute");
      case 6:
        return list([&] { return r.f32("floats attribute"); }, 4);
      case 7:
        return list([&] { return r.str("strings attribute"); }, 4);
      case 8:
        return list([&] { return tensor(r); }, 12);
      case 9:
        return list([&] { return graph(r, depth + 1); }, 20);
    }
    r.fail("attribute kind " + std::to_string(kind) + " is not valid");
  }

  const uint8_t* data_;
  Section weights_;
  Section packed_;
  std::shared_ptr<const void> owner_;
};

struct PackedEntry {
  uint64_t offset = 0;
  uint32_t checksum = 0;
};

// The packed section's entry in the table, checked to lie after the table and to end the file.
PackedEntry findPackedEntry(const uint8_t* p, size_t size) {
  const uint32_t count = load<uint32_t>(p + 36);
  if (count < 7 || count > 8 || load<uint64_t>(p + 48) != kHeaderSize ||
      size - kHeaderSize < uint64_t{count} * 24) {
    invalid("plan section table is corrupted");
  }
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = p + kHeaderSize + i * 24;
    if (load<uint32_t>(e) != kPackedSection) continue;
    const PackedEntry packed{load<uint64_t>(e + 8), load<uint32_t>(e + 4)};
    if (packed.offset < kHeaderSize + uint64_t{count} * 24 || packed.offset > size ||
        load<uint64_t>(e + 16) != size - packed.offset) {
      invalid("plan section table is corrupted (the packed weights section does not end the file)");
    }
    return packed;
  }
  invalid("plan section table is corrupted (no packed weights section)");
}

void checkCrc(uint32_t computed, uint32_t stored, const char* what) {
  if (computed == stored) return;
  char buf[80];
  std::snprintf(buf, sizeof(buf), "(stored CRC-32C %08x, computed %08x)", stored, computed);
  invalid(std::string(what) + " " + buf + ": the file is corrupted");
}

void checkHeader(const uint8_t* p, size_t size, uint32_t hostFeatures, PackedCheck packedCheck) {
  if (size < kHeaderSize) {
    invalid("plan is truncated: " + std::to_string(size) + " bytes, but its header alone is " +
            std::to_string(kHeaderSize) + " bytes");
  }
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0)
    invalid("not a kiln plan (the file does not start with 'KILNPLAN')");
  const uint32_t version = load<uint32_t>(p + kFormatVersionOffset);
  if (version != kFormatVersion) {
    invalid("plan format version " + std::to_string(version) + " is not supported: this kiln (" +
            kKilnVersion + ") reads plan format version " + std::to_string(kFormatVersion) +
            "; rebuild the plan with `kiln build`");
  }
  if (load<uint32_t>(p + 12) != kHeaderSize)
    invalid("plan header is corrupted (header size field)");
  const uint64_t fileSize = load<uint64_t>(p + 40);
  if (size < fileSize) {
    invalid("plan is truncated: it has " + std::to_string(size) + " bytes, its header says " +
            std::to_string(fileSize));
  }
  if (size > fileSize) {
    invalid("plan is corrupted: it has " + std::to_string(size) + " bytes, its header says " +
            std::to_string(fileSize));
  }
  const PackedEntry packed = findPackedEntry(p, size);
  checkCrc(headerChecksum(p, packed.offset), load<uint32_t>(p + kChecksumOffset),
           "plan checksum mismatch");
  if (packedCheck == PackedCheck::kVerify) {
    checkCrc(crc32c(p + packed.offset, size - packed.offset), packed.checksum,
             "packed weights checksum mismatch");
  }
  const uint32_t needed = load<uint32_t>(p + 32);
  if (needed & ~hostFeatures) {
    invalid("plan needs CPU features this machine lacks: " +
            cpuFeatureNames(needed & ~hostFeatures) + " (plan requires " + cpuFeatureNames(needed) +
            "; this machine has " + cpuFeatureNames(hostFeatures) + ")");
  }
}

std::vector<Section> readSectionTable(const uint8_t* p, size_t size) {
  const uint32_t count = load<uint32_t>(p + 36);
  const uint64_t tableOffset = load<uint64_t>(p + 48);
  if ((count != 7 && count != 8) || tableOffset != kHeaderSize ||
      size - kHeaderSize < uint64_t{count} * 24) {
    invalid("plan section table is corrupted");
  }
  std::vector<Section> sections(kPackedSection + 1);
  const uint64_t dataStart = kHeaderSize + uint64_t{count} * 24;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = p + kHeaderSize + i * 24;
    const uint32_t id = load<uint32_t>(e);
    Section s{load<uint64_t>(e + 8), load<uint64_t>(e + 16), true};
    if (id < kBuildInfoSection || id > kPackedSection || sections[id].present) {
      invalid("plan section table is corrupted (section id " + std::to_string(id) + ")");
    }
    if (s.offset < dataStart || s.offset > size || s.size > size - s.offset ||
        s.offset % kWeightAlignment) {
      invalid(std::string("plan section '") + sectionName(id) + "' at offset " +
              std::to_string(s.offset) + " (" + std::to_string(s.size) +
              " bytes) lies outside the file of " + std::to_string(size) + " bytes");
    }
    sections[id] = s;
  }
  // 7 sections: all but plugins; 8: all.
  for (uint32_t id = kBuildInfoSection; id <= kPackedSection; ++id) {
    if (!sections[id].present && !(id == kPluginsSection && count == 7)) {
      invalid(std::string("plan section table is corrupted (no ") + sectionName(id) + " section)");
    }
  }
  return sections;
}

ByteReader sectionReader(const uint8_t* p, const std::vector<Section>& sections, uint32_t id) {
  return ByteReader(p, sections[id].offset, sections[id].offset + sections[id].size,
                    sectionName(id));
}

void expectEnd(const ByteReader& r) {
  if (!r.atEnd()) r.fail(std::to_string(r.remaining()) + " unexpected bytes at the end");
}

PlanInfo readBuildInfo(ByteReader r) {
  PlanInfo info;
  info.formatVersion = kFormatVersion;
  info.kilnVersion = r.str("kiln version");
  info.threads = r.i32("threads");
  info.workspaceBytes = r.u64("workspace");
  info.builderFlags = r.u32("builder flags");
  info.layersBefore = r.i32("layer count");
  info.layersAfter = r.i32("layer count");
  info.arenaBytes = r.u64("arena size");
  info.source = r.str("source");
  info.builderOptimizationLevel = r.i32("builder optimization level");
  if (info.threads < 0) r.fail("thread count is negative");
  if (info.builderOptimizationLevel < 0 || info.builderOptimizationLevel > 5)
    r.fail("builder optimization level is not in 0..5");
  expectEnd(r);
  return info;
}

Shape readDims(ByteReader& r, const char* what) {
  Shape d = r.i64s(what);
  if (d.size() > kMaxTensorRank)
    r.fail(std::string(what) + " has rank " + std::to_string(d.size()));
  for (int64_t x : d)
    if (x < -1) r.fail(std::string(what) + " has dim " + std::to_string(x));
  return d;
}

std::vector<IOTensor> readIO(ByteReader r, const ir::Graph& g) {
  std::vector<IOTensor> io(r.count("I/O tensor", 19));
  for (IOTensor& t : io) {
    t.name = r.str("I/O name");
    uint8_t mode = r.u8("I/O mode");
    if (mode != 1 && mode != 2)
      r.fail("I/O tensor '" + t.name + "' has mode " + std::to_string(mode));
    t.mode = static_cast<TensorIOMode>(mode);
    int32_t dtype = r.i32("I/O data type");
    t.dtype = static_cast<DataType>(dtype);
    if (dtype < 0 || dtype > static_cast<int>(DataType::kInt2) ||
        !(t.dtype == DataType::kUndefined || isSupportedDataType(t.dtype))) {
      r.fail("I/O tensor '" + t.name + "' has data type code " + std::to_string(dtype));
    }
    t.hasShape = r.u8("I/O shape flag") != 0;
    t.dims = readDims(r, "I/O dims");
    t.hasDefault = r.u8("I/O default flag") != 0;
    t.valueId = r.i32("I/O tensor id");
    const auto& list = t.mode == TensorIOMode::kINPUT ? g.inputs : g.outputs;
    if (std::find(list.begin(), list.end(), t.valueId) == list.end() ||
        g.value(t.valueId).name != t.name) {
      r.fail("I/O tensor '" + t.name + "' does not match the graph's inputs and outputs");
    }
  }
  expectEnd(r);
  return io;
}

std::vector<Profile> readProfiles(ByteReader r, const std::vector<IOTensor>& io) {
  std::vector<Profile> profiles(r.count("profile", 4));
  for (Profile& p : profiles) {
    p.entries.resize(r.count("profile entry", 28));
    for (ProfileEntry& e : p.entries) {
      e.input = r.str("profile input");
      for (Shape& d : e.dims) d = readDims(r, "profile dims");
      for (auto& v : e.values) v = r.i64s("profile values");
      auto it = std::find_if(io.begin(), io.end(), [&](const IOTensor& t) {
        return t.name == e.input && t.mode == TensorIOMode::kINPUT;
      });
      if (it == io.end()) r.fail("profile names '" + e.input + "', which is not an input");
      for (int k = 0; k < 3; ++k) {
        if (e.dims[k].size() != e.dims[0].size() || e.values[k].size() != e.values[0].size()) {
          r.fail("profile ranks of input '" + e.input + "' differ");
        }
      }
      for (size_t i = 0; i < e.dims[0].size(); ++i) {
        if (e.dims[0][i] < 0 || e.dims[0][i] > e.dims[1][i] || e.dims[1][i] > e.dims[2][i]) {
          r.fail("profile of input '" + e.input + "' has min > opt > max at index " +
                 std::to_string(i));
        }
      }
    }
  }
  expectEnd(r);
  return profiles;
}

// The CPU feature bit a layer's kernel ISA names; 0 for a name this reader does not know.
uint32_t isaFeature(const std::string& name) {
  if (name == "avx2") return kAvx2;
  if (name == "avx512f") return kAvx512f;
  if (name == "avxvnni") return kAvxVnni;
  if (name == "avx512vnni") return kAvx512Vnni | kAvx512f;
  if (name == "avx512bf16") return kAvx512Bf16 | kAvx512f;
  if (name == "avx512fp16") return kAvx512Fp16 | kAvx512f;
  return 0;
}

// Reads layer states whose blobs view the packed section of `data` (kept alive by `owner`), or
// copies of them when there is no owner.
class KernelStateReader {
 public:
  KernelStateReader(const uint8_t* data, Section packed, std::shared_ptr<const void> owner)
      : data_(data), packed_(packed), owner_(std::move(owner)) {}

  cpu::KernelState operator()(ByteReader& r, const LayerInfo& layer) {
    cpu::KernelState state;
    const std::string params = r.str("kernel parameters");
    state.params.assign(params.begin(), params.end());
    const uint32_t blobs = r.count("packed blob", 16);
    for (uint32_t k = 0; k < blobs; ++k) {
      const uint64_t offset = r.u64("packed blob offset");
      const uint64_t bytes = r.u64("packed blob size");
      if (offset > packed_.size || bytes > packed_.size - offset || offset % kWeightAlignment) {
        r.fail("layer '" + layer.name + "': packed blob " + std::to_string(k) + " at offset " +
               std::to_string(offset) + " (" + std::to_string(bytes) +
               " bytes) lies outside the packed weights section of " +
               std::to_string(packed_.size) + " bytes or is not 64-byte aligned");
      }
      state.blobs.push_back({data_ + packed_.offset + offset, bytes});
    }
    state.owner = owner_;
    if (!owner_ && !state.blobs.empty()) copyBlobs(state);
    return state;
  }

 private:
  // The caller's bytes may go away after reading: the blobs get one aligned buffer of their own.
  static void copyBlobs(cpu::KernelState& state) {
    uint64_t total = 0;
    for (const cpu::KernelBlob& b : state.blobs)
      total += (b.bytes + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
    auto* buffer = static_cast<uint8_t*>(allocateAligned(std::max<uint64_t>(total, 1)));
    if (!buffer)
      invalid("out of memory copying " + std::to_string(total) + " bytes of packed weights");
    state.owner =
        std::shared_ptr<const void>(buffer, [](const void* q) { std::free(const_cast<void*>(q)); });
    uint64_t at = 0;
    for (cpu::KernelBlob& b : state.blobs) {
      if (b.bytes) std::memcpy(buffer + at, b.data, b.bytes);
      b.data = buffer + at;
      at += (b.bytes + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
    }
  }

  const uint8_t* data_;
  Section packed_;
  std::shared_ptr<const void> owner_;
};

std::vector<LayerInfo> readLayers(ByteReader r, const ir::Graph& g, uint32_t hostFeatures,
                                  KernelStateReader& kernelState,
                                  std::vector<cpu::KernelState>& states) {
  std::vector<LayerInfo> layers(r.count("layer", 32));
  if (layers.size() != g.nodes.size()) {
    r.fail(std::to_string(layers.size()) + " layers for " + std::to_string(g.nodes.size()) +
           " graph nodes");
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerInfo& l = layers[i];
    l.name = r.str("layer name");
    l.type = r.str("layer type");
    l.kernel = r.str("kernel");
    l.kernelIsa = r.str("kernel ISA");
    const uint32_t feature = isaFeature(l.kernelIsa);
    if (!feature)
      r.fail("layer '" + l.name + "': kernel " + l.kernel + " needs unknown ISA '" + l.kernelIsa +
             "'");
    if ((hostFeatures & feature) != feature) {
      invalid("layer '" + l.name + "' (" + l.type + "): kernel " + l.kernel + " needs " +
              l.kernelIsa + ", which this machine lacks (it has " + cpuFeatureNames(hostFeatures) +
              "); rebuild the plan on it");
    }
    const uint32_t declined = r.count("declined kernel", 4);
    for (uint32_t k = 0; k < declined; ++k) l.declinedKernels.push_back(r.str("declined kernel"));
    uint32_t fused = r.count("fused layer", 4);
    for (uint32_t k = 0; k < fused; ++k) l.fusedFrom.push_back(r.str("fused layer name"));
    l.kernelChoice = r.str("kernel choice");
    if (l.kernelChoice != "heuristics" && l.kernelChoice != "timed" &&
        l.kernelChoice != "timing cache")
      r.fail("layer '" + l.name + "': unknown kernel choice '" + l.kernelChoice + "'");
    const uint32_t tactics = r.count("tactic", 16);
    for (uint32_t k = 0; k < tactics; ++k) {
      TacticTiming& t = l.tactics.emplace_back();
      t.kernel = r.str("tactic kernel");
      t.milliseconds = r.f64("tactic time");
      t.note = r.str("tactic note");
      if (!(t.milliseconds < 0 || t.milliseconds >= 0))
        r.fail("layer '" + l.name + "': tactic " + t.kernel + " has a NaN time");
    }
    states.push_back(kernelState(r, l));
    const ir::Node& node = g.nodes[i];
    for (int id : node.inputs) l.inputs.push_back(id == ir::kNoValue ? "" : g.value(id).name);
    for (int id : node.outputs) l.outputs.push_back(id == ir::kNoValue ? "" : g.value(id).name);
    l.precision = ir::layerPrecision(g, node);
  }
  expectEnd(r);
  return layers;
}

}  // namespace

Plan readPlan(const void* data, size_t size, uint32_t hostFeatures,
              std::shared_ptr<const void> owner, PackedCheck packedCheck) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (!p && size) invalid("plan data is null");
  checkHeader(p, size, hostFeatures, packedCheck);
  std::vector<Section> sections = readSectionTable(p, size);
  Plan plan;
  plan.cpuFeatures = load<uint32_t>(p + 32);
  plan.info = readBuildInfo(sectionReader(p, sections, kBuildInfoSection));
  plan.info.cpuFeatures = cpuFeatureNames(plan.cpuFeatures);
  ByteReader graphReader = sectionReader(p, sections, kGraphSection);
  plan.graph = GraphReader(p, sections[kWeightsSection], sections[kPackedSection], owner)
                   .graph(graphReader, 0);
  expectEnd(graphReader);
  plan.io = readIO(sectionReader(p, sections, kIOSection), *plan.graph);
  plan.profiles = readProfiles(sectionReader(p, sections, kProfilesSection), plan.io);
  KernelStateReader kernelState(p, sections[kPackedSection], std::move(owner));
  plan.layers = readLayers(sectionReader(p, sections, kLayersSection), *plan.graph, hostFeatures,
                           kernelState, plan.kernelStates);
  // Last: a plugin that is not registered is reported only for an otherwise valid plan.
  if (sections[kPluginsSection].present)
    readPlugins(sectionReader(p, sections, kPluginsSection), *plan.graph);
  return plan;
}

}  // namespace kiln::plan
