#include "onnx/loader.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>

#include "ir/onnx_type_table.h"
#include "ir/op_schema.h"
#include "kiln/error.h"
#include "onnx/implicit_inputs.h"
#include "onnx/tensor_proto.h"
#include "plugin/plugin_node.h"

namespace kiln::onnx_import {

namespace {

namespace fs = std::filesystem;

class GraphConverter {
 public:
  /// `rawInitializers`: the top-level initializers' raw_data, moved out of the protobuf by name.
  GraphConverter(const ir::Model& model, std::string baseDir, std::string file,
                 std::map<std::string, std::shared_ptr<std::string>> rawInitializers = {})
      : model_(model),
        baseDir_(std::move(baseDir)),
        file_(std::move(file)),
        rawInitializers_(std::move(rawInitializers)) {}

  /// A subgraph (isSubgraph) may name outer-scope tensors as outputs.
  ir::Graph convert(const onnx::GraphProto& proto, std::map<std::string, int>* opCounts,
                    bool isSubgraph = false);

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw Error(ErrorCode::kInvalidModel, file_ + ": " + message);
  }
  /// `what` names the value in errors ("graph input 'x'").
  ir::TypeInfo typeFromProto(const onnx::TypeProto& type, const std::string& what) const;
  ir::TypeInfo mapTypeFromProto(const onnx::TypeProto_Map& map, const std::string& what) const;
  DataType elementType(int32_t elemType, const std::string& what) const;
  ir::Attribute attributeFromProto(const onnx::AttributeProto& a, const std::string& nodeLabel,
                                   std::map<std::string, int>* opCounts);
  bool convertConstantNode(const onnx::NodeProto& node, ir::Graph& graph, const std::string& label);
  int64_t opsetFor(const std::string& domain, const std::string& label) const;

  const ir::Model& model_;
  std::string baseDir_;
  std::string file_;
  std::map<std::string, std::shared_ptr<std::string>> rawInitializers_;
};

DataType GraphConverter::elementType(int32_t elemType, const std::string& what) const {
  // Complex types are ONNX types kiln refuses later, naming the node that uses them; a code past
  // the last type kiln knows (kInt2) is refused here.
  const auto dtype = static_cast<DataType>(elemType);
  if (elemType < 0 || elemType > static_cast<int32_t>(DataType::kInt2)) {
    fail(what + " has elem_type " + std::to_string(elemType) +
         ", which is not an ONNX data type kiln knows");
  }
  return dtype;
}

// A map of tensor values, as ai.onnx.ml declares them: int64 or string keys.
ir::TypeInfo GraphConverter::mapTypeFromProto(const onnx::TypeProto_Map& map,
                                              const std::string& what) const {
  ir::TypeInfo info;
  info.mapKeyType = elementType(map.key_type(), what + " (map key)");
  if (info.mapKeyType != DataType::kInt64 && info.mapKeyType != DataType::kString)
    fail(what + " is a map with " + dataTypeName(info.mapKeyType) +
         " keys; ONNX maps have int64 or string keys");
  if (!map.value_type().has_tensor_type()) fail(what + " is a map whose values are not tensors");
  info.dtype = elementType(map.value_type().tensor_type().elem_type(), what + " (map value)");
  return info;
}

ir::TypeInfo GraphConverter::typeFromProto(const onnx::TypeProto& type,
                                           const std::string& what) const {
  ir::TypeInfo info;
  if (type.has_optional_type()) {  // an optional tensor or sequence
    const onnx::TypeProto& element = type.optional_type().elem_type();
    if (!element.has_tensor_type() && !element.has_sequence_type()) return info;  // optional maps
    info = typeFromProto(element, what);
    info.isOptional = true;
    return info;
  }
  if (type.has_sequence_type() && type.sequence_type().elem_type().has_tensor_type()) {
    info.dtype = elementType(type.sequence_type().elem_type().tensor_type().elem_type(), what);
    info.isSequence = true;  // the items' shapes are not tracked
    return info;
  }
  if (type.has_map_type()) return mapTypeFromProto(type.map_type(), what);
  if (type.has_sequence_type() && type.sequence_type().elem_type().has_map_type()) {
    info = mapTypeFromProto(type.sequence_type().elem_type().map_type(), what);
    info.isSequence = true;  // ZipMap's seq(map(int64|string, float))
    return info;
  }
  if (!type.has_tensor_type()) return info;  // sequences of sequences, sparse tensors
  info.dtype = elementType(type.tensor_type().elem_type(), what);
  if (type.tensor_type().has_shape()) {
    ir::SymShape shape;
    for (const auto& d : type.tensor_type().shape().dim()) {
      if (d.has_dim_value() && d.dim_value() >= 0)
        shape.push_back(ir::Dim::known(d.dim_value()));
      else if (d.has_dim_param())
        shape.push_back(ir::Dim::named(d.dim_param()));
      else
        shape.push_back(ir::Dim::unknown());
    }
    info.shape = std::move(shape);
  }
  return info;
}

// A TYPE_PROTO attribute (Optional's `type`) kept as text: "tensor(float32)", "seq(tensor(int64))",
// "optional(seq(tensor(float32)))" (see ir::parseValueType); empty for kinds kiln has no value for.
std::string typeAttributeText(const onnx::TypeProto& type) {
  if (type.has_tensor_type()) {
    return "tensor(" + dataTypeName(static_cast<DataType>(type.tensor_type().elem_type())) + ")";
  }
  const onnx::TypeProto* inner = type.has_sequence_type()   ? &type.sequence_type().elem_type()
                                 : type.has_optional_type() ? &type.optional_type().elem_type()
                                                            : nullptr;
  if (!inner) return "";
  const std::string element = typeAttributeText(*inner);
  if (element.empty()) return "";
  return (type.has_sequence_type() ? "seq(" : "optional(") + element + ")";
}

ir::Attribute GraphConverter::attributeFromProto(const onnx::AttributeProto& a,
                                                 const std::string& nodeLabel,
                                                 std::map<std::string, int>* opCounts) {
  std::string where = nodeLabel + " attribute '" + a.name() + "'";
  using AP = onnx::AttributeProto;
  auto subgraph = [&](const onnx::GraphProto& g) {
    return std::make_shared<ir::Graph>(
        GraphConverter(model_, baseDir_, file_).convert(g, opCounts, true));
  };
  switch (a.type()) {
    case AP::FLOAT:
      return a.f();
    case AP::INT:
      return a.i();
    case AP::STRING:
      return a.s();
    case AP::TENSOR:
      return tensorFromProto(a.t(), baseDir_, file_ + ": " + where);
    case AP::GRAPH:
      return subgraph(a.g());
    case AP::TYPE_PROTO: {
      std::string text = typeAttributeText(a.tp());
      if (text.empty()) {
        throw Error(ErrorCode::kUnsupportedNode,
                    file_ + ": " + where + " is a map or sparse type, which kiln does not support");
      }
      return text;
    }
    case AP::FLOATS:
      return std::vector<float>(a.floats().begin(), a.floats().end());
    case AP::INTS:
      return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case AP::STRINGS:
      return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case AP::TENSORS: {
      std::vector<Tensor> v;
      for (const auto& t : a.tensors())
        v.push_back(tensorFromProto(t, baseDir_, file_ + ": " + where));
      return v;
    }
    case AP::GRAPHS: {
      std::vector<std::shared_ptr<ir::Graph>> v;
      for (const auto& g : a.graphs()) v.push_back(subgraph(g));
      return v;
    }
    default:
      throw Error(ErrorCode::kUnsupportedNode, file_ + ": " + where + " has attribute type " +
                                                   AP::AttributeType_Name(a.type()) +
                                                   ", which kiln does not support");
  }
}

// Constant nodes become constant values, so shape inference and folding see them.
bool GraphConverter::convertConstantNode(const onnx::NodeProto& node, ir::Graph& graph,
                                         const std::string& label) {
  if (node.op_type() != "Constant" || !(node.domain().empty() || node.domain() == "ai.onnx"))
    return false;
  if (node.output_size() != 1 || node.attribute_size() != 1) {
    fail(label + " must have exactly one output and one value attribute");
  }
  const auto& a = node.attribute(0);
  const std::string where = file_ + ": " + label;
  Tensor value;
  if (a.name() == "value") {
    value = tensorFromProto(a.t(), baseDir_, where);
  } else if (a.name() == "value_float") {
    value = Tensor::fromVector<float>(DataType::kFloat32, {}, {a.f()});
  } else if (a.name() == "value_floats") {
    value = Tensor::fromVector<float>(DataType::kFloat32, {a.floats_size()},
                                      {a.floats().begin(), a.floats().end()});
  } else if (a.name() == "value_int") {
    value = Tensor::fromVector<int64_t>(DataType::kInt64, {}, {a.i()});
  } else if (a.name() == "value_ints") {
    value = Tensor::fromVector<int64_t>(DataType::kInt64, {a.ints_size()},
                                        {a.ints().begin(), a.ints().end()});
  } else if (a.name() == "value_string") {
    value = Tensor::fromVector<std::string>(DataType::kString, {}, {a.s()});
  } else if (a.name() == "value_strings") {
    value = Tensor::fromVector<std::string>(DataType::kString, {a.strings_size()},
                                            {a.strings().begin(), a.strings().end()});
  } else {
    throw Error(ErrorCode::kUnsupportedNode,
                where + ": attribute '" + a.name() + "' is not supported");
  }
  int id = graph.valueId(node.output(0));
  ir::Value& v = graph.value(id);
  if (v.constant) fail("tensor '" + node.output(0) + "' is defined twice");
  v.type = ir::TypeInfo{value.dtype(), ir::symShapeOf(value.shape())};
  v.constant = std::move(value);
  return true;
}

int64_t GraphConverter::opsetFor(const std::string& domain, const std::string& label) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = model_.opsets.find(d);
  if (it == model_.opsets.end()) {
    fail(label + " uses domain '" + (d.empty() ? "ai.onnx" : d) +
         "', which the model does not import (opset_import)");
  }
  return it->second;
}

ir::Graph GraphConverter::convert(const onnx::GraphProto& proto,
                                  std::map<std::string, int>* opCounts, bool isSubgraph) {
  ir::Graph graph;
  graph.name = proto.name();
  for (const auto& init : proto.initializer()) {
    if (init.name().empty()) fail("an initializer has no name");
    if (graph.findValue(init.name()) != ir::kNoValue)
      fail("initializer '" + init.name() + "' is defined twice");
    std::shared_ptr<std::string> raw;
    if (auto it = rawInitializers_.find(init.name()); !isSubgraph && it != rawInitializers_.end()) {
      raw = std::move(it->second);
      rawInitializers_.erase(it);
    }
    Tensor t = tensorFromProto(init, baseDir_, file_ + ": initializer '" + init.name() + "'",
                               std::move(raw));
    int id = graph.addValue(init.name(), ir::TypeInfo{t.dtype(), ir::symShapeOf(t.shape())});
    graph.value(id).constant = std::move(t);
  }
  // Before IR version 4 every initializer had to be listed among the inputs too; those are
  // weights, not inputs (onnxruntime treats them so). From version 4 on, an initializer that is
  // also an input is an overridable default.
  const bool initializersAreInputs = !isSubgraph && model_.irVersion != 0 && model_.irVersion < 4;
  for (const auto& in : proto.input()) {
    int id = graph.findValue(in.name());
    if (id == ir::kNoValue) {
      id = graph.addValue(in.name(), typeFromProto(in.type(), "graph input '" + in.name() + "'"));
    } else if (initializersAreInputs && graph.value(id).constant) {
      continue;
    }
    if (graph.isGraphInput(id)) fail("graph input '" + in.name() + "' is listed twice");
    graph.inputs.push_back(id);
  }
  for (const auto& vi : proto.value_info()) {
    int id = graph.valueId(vi.name());
    if (!graph.value(id).constant)
      graph.value(id).type = typeFromProto(vi.type(), "value_info '" + vi.name() + "'");
  }
  for (int i = 0; i < proto.node_size(); ++i) {
    const auto& np = proto.node(i);
    if (opCounts) ++(*opCounts)[np.op_type()];
    std::string name = importedNodeName(np.name(), np.op_type(), i);
    std::string label = "node '" + name + "' (" + np.op_type() + ")";
    if (np.output_size() == 0)
      fail(label + " has no outputs; every ONNX operator has at least one");
    if (convertConstantNode(np, graph, label)) continue;
    ir::Node node;
    node.name = name;
    node.opType = np.op_type();
    node.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    node.opset = opsetFor(node.domain, label);
    for (const auto& in : np.input())
      node.inputs.push_back(in.empty() ? ir::kNoValue : graph.valueId(in));
    for (const auto& out : np.output())
      node.outputs.push_back(out.empty() ? ir::kNoValue : graph.valueId(out));
    for (const auto& a : np.attribute()) {
      if (!a.ref_attr_name().empty())
        fail(label + " attribute '" + a.name() + "' refers to a function attribute");
      node.attrs[a.name()] = attributeFromProto(a, label, opCounts);
    }
    try {  // an op kiln does not implement may be a plugin (and `Plugin` nodes are)
      plugin::resolvePluginNode(node);
    } catch (const Error& e) {
      throw Error(e.code(), file_ + ": " + e.what());
    }
    graph.nodes.push_back(std::move(node));
  }
  for (const auto& out : proto.output()) {
    int id = isSubgraph ? graph.valueId(out.name()) : graph.findValue(out.name());
    if (id == ir::kNoValue)
      fail("graph output '" + out.name() + "' is not produced by any node, initializer or input");
    ir::TypeInfo declared = typeFromProto(out.type(), "graph output '" + out.name() + "'");
    ir::Value& v = graph.value(id);
    if (v.type.dtype == DataType::kUndefined) v.type.dtype = declared.dtype;
    if (!v.type.shape) v.type.shape = declared.shape;
    v.type.isSequence = v.type.isSequence || declared.isSequence;
    v.type.isOptional = v.type.isOptional || declared.isOptional;
    if (v.type.mapKeyType == DataType::kUndefined) v.type.mapKeyType = declared.mapKeyType;
    if (v.type.isSequence) v.type.shape = std::nullopt;
    graph.outputs.push_back(id);
  }
  return graph;
}

// A file format newer than kiln knows, or an opset version below ONNX's first, cannot be read as
// meant. A missing ir_version is tolerated (older exporters and hand-built models leave it out;
// `kiln check` flags it).
void checkVersions(const onnx::ModelProto& proto, const std::string& displayName) {
  if (proto.ir_version() > ir::kOnnxLatestIrVersion) {
    throw Error(ErrorCode::kInvalidModel, displayName + ": ir_version " +
                                              std::to_string(proto.ir_version()) +
                                              " is newer than the newest kiln knows (" +
                                              std::to_string(ir::kOnnxLatestIrVersion) + ")");
  }
  for (const auto& op : proto.opset_import()) {
    if (op.version() >= 1) continue;
    const std::string domain = op.domain().empty() ? "ai.onnx" : op.domain();
    throw Error(ErrorCode::kInvalidModel, displayName + ": opset_import imports domain '" + domain +
                                              "' at version " + std::to_string(op.version()) +
                                              "; opset versions start at 1");
  }
}

void readModelHeader(const onnx::ModelProto& proto, ir::Model& model) {
  model.irVersion = proto.ir_version();
  model.producerName = proto.producer_name();
  model.producerVersion = proto.producer_version();
  for (const auto& op : proto.opset_import()) {
    std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
    model.opsets[d] = op.version();
  }
  // IR version 1/2 files predate opset_import and mean opset 1.
  if (proto.opset_import_size() == 0 && proto.ir_version() < 3) model.opsets[""] = 1;
  for (const auto& kv : proto.metadata_props()) model.metadata[kv.key()] = kv.value();
}

}  // namespace

namespace {

// protobuf refuses messages nested deeper than this (its default recursion limit).
constexpr int kProtobufNestingLimit = 100;
// Depth up to which a failed parse is retried to tell deep nesting from damage.
constexpr int kDiagnosticNestingLimit = 8000;  // If/Loop nested 2000 deep: about 6000

// Whether the model parses when messages may nest deeper than protobuf's default limit: the one
// parse failure that is not a damaged file (If/Loop/Scan subgraphs nested about 33 levels deep).
bool parsesWhenNestedDeeper(google::protobuf::io::ZeroCopyInputStream& in) {
  google::protobuf::io::CodedInputStream coded(&in);
  coded.SetRecursionLimit(kDiagnosticNestingLimit);
  onnx::ModelProto proto;
  return proto.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
}

// nestedTooDeep re-reads the model into parsesWhenNestedDeeper; it is called only after a failure.
void checkParsed(bool parsed, const onnx::ModelProto& proto, const std::string& displayName,
                 const std::function<bool()>& nestedTooDeep) {
  if (!parsed) {
    if (nestedTooDeep()) {
      throw Error(ErrorCode::kInvalidModel,
                  displayName +
                      ": not a valid ONNX model for kiln: its protobuf messages nest more than " +
                      std::to_string(kProtobufNestingLimit) +
                      " levels deep (each If/Loop/Scan subgraph inside another adds 3 levels), the "
                      "most kiln reads");
    }
    throw Error(ErrorCode::kInvalidModel, displayName +
                                              ": not a valid ONNX model (the protobuf could not be "
                                              "parsed; the file may be truncated or corrupted)");
  }
  if (!proto.has_graph()) {
    throw Error(ErrorCode::kInvalidModel,
                displayName + ": not a valid ONNX model (it has no graph)");
  }
}

void readMetadata(const onnx::ModelProto& proto, ModelMetadata& metadata) {
  metadata.producerName = proto.producer_name();
  metadata.producerVersion = proto.producer_version();
  metadata.domain = proto.domain();
  metadata.description = proto.doc_string();
  if (proto.has_model_version()) metadata.version = proto.model_version();
  metadata.graphName = proto.graph().name();
  metadata.graphDescription = proto.graph().doc_string();
  for (const auto& kv : proto.metadata_props()) metadata.custom[kv.key()] = kv.value();
}

// Top-level initializers that no node reads (subgraphs' outer reads are node inputs by now) and
// that are neither graph inputs nor outputs: one warning naming them.
void warnOfUnusedInitializers(const onnx::GraphProto& proto, const ir::Graph& graph,
                              const std::string& displayName, ILogger& warnings) {
  std::vector<bool> read(graph.values.size(), false);
  for (const ir::Node& node : graph.nodes) {
    for (int id : node.inputs) {
      if (id != ir::kNoValue) read[static_cast<size_t>(id)] = true;
    }
  }
  for (int id : graph.outputs) read[static_cast<size_t>(id)] = true;
  for (int id : graph.inputs) read[static_cast<size_t>(id)] = true;
  std::vector<std::string> unused;
  for (const auto& init : proto.initializer()) {
    if (!read[static_cast<size_t>(graph.findValue(init.name()))]) unused.push_back(init.name());
  }
  if (unused.empty()) return;
  constexpr size_t kNamed = 5;
  std::string names;
  for (size_t i = 0; i < unused.size() && i < kNamed; ++i)
    names += (i ? ", '" : "'") + unused[i] + "'";
  if (unused.size() > kNamed) names += " and " + std::to_string(unused.size() - kNamed) + " more";
  warnings.log(Severity::kWARNING, displayName + ": " + std::to_string(unused.size()) +
                                       " initializer" + (unused.size() > 1 ? "s are" : " is") +
                                       " not used by any node (" + names + "); kiln ignores " +
                                       (unused.size() > 1 ? "them" : "it"));
}

ir::Model convertModel(onnx::ModelProto& proto, const std::string& baseDir,
                       const std::string& displayName, ModelMetadata* metadata, ILogger* warnings) {
  if (metadata) readMetadata(proto, *metadata);
  ir::Model model;
  model.path = displayName;
  checkVersions(proto, displayName);
  readModelHeader(proto, model);
  // The weights' bytes move from the protobuf into the tensors instead of being copied, so a model
  // is not held twice in memory while it loads.
  std::map<std::string, std::shared_ptr<std::string>> rawInitializers;
  for (auto& init : *proto.mutable_graph()->mutable_initializer()) {
    if (init.has_raw_data() && init.data_location() != onnx::TensorProto::EXTERNAL)
      rawInitializers[init.name()] = std::shared_ptr<std::string>(init.release_raw_data());
  }
  model.graph = GraphConverter(model, baseDir, displayName, std::move(rawInitializers))
                    .convert(proto.graph(), &model.opCounts);
  model.initializerCount = static_cast<size_t>(proto.graph().initializer_size());
  for (const auto& init : proto.graph().initializer()) {
    model.initializerBytes +=
        model.graph.value(model.graph.findValue(init.name())).constant->byteSize();
  }
  try {
    resolveImplicitInputs(model.graph);
    ir::sortTopologically(model.graph);
    ir::verifyGraph(model.graph);
  } catch (const Error& e) {
    throw Error(e.code(), displayName + ": " + e.what());
  }
  if (warnings) warnOfUnusedInitializers(proto.graph(), model.graph, displayName, *warnings);
  return model;
}

}  // namespace

std::string importedNodeName(const std::string& name, const std::string& opType, int index) {
  return name.empty() ? opType + "_" + std::to_string(index) : name;
}

ir::Model loadModelFromBytes(const void* data, size_t size, const std::string& baseDir,
                             const std::string& displayName, ModelMetadata* metadata,
                             ILogger* warnings) {
  onnx::ModelProto proto;
  if (size > static_cast<size_t>(INT32_MAX)) {
    throw Error(ErrorCode::kInvalidModel,
                displayName + ": model is larger than 2 GiB; store the weights as external data");
  }
  checkParsed(proto.ParseFromArray(data, static_cast<int>(size)), proto, displayName, [&] {
    google::protobuf::io::ArrayInputStream in(data, static_cast<int>(size));
    return parsesWhenNestedDeeper(in);
  });
  return convertModel(proto, baseDir, displayName, metadata, warnings);
}

ir::Model loadModel(const std::string& path, ModelMetadata* metadata, ILogger* warnings) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Error(ErrorCode::kIoError, path + ": is a directory, not a model file");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(ErrorCode::kIoError, path + ": cannot open the model file");
  const auto size = fs::file_size(path, ec);
  if (!ec && size == 0) throw Error(ErrorCode::kInvalidModel, path + ": the file is empty");
  if (!ec && size > static_cast<uintmax_t>(INT32_MAX)) {
    throw Error(ErrorCode::kInvalidModel,
                path + ": model is larger than 2 GiB; store the weights as external data");
  }
  // Parsed from the stream, so the file's bytes are never held in memory beside the protobuf.
  onnx::ModelProto proto;
  checkParsed(proto.ParseFromIstream(&file), proto, path, [&] {
    std::ifstream again(path, std::ios::binary);
    google::protobuf::io::IstreamInputStream in(&again);
    return again && parsesWhenNestedDeeper(in);
  });
  fs::path dir = fs::path(path).parent_path();
  return convertModel(proto, dir.empty() ? "." : dir.string(), path, metadata, warnings);
}

}  // namespace kiln::onnx_import
