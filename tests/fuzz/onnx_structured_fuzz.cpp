// Fuzz target: ONNX models mutated as ModelProto messages rather than as bytes (Debian and PyPI
// have no libprotobuf-mutator for C++), so most mutants still parse and reach the importer and
// shape inference: dims of value infos and initializers, element types, attribute values and types,
// node inputs and outputs, op types, node order, opset versions. Each input is checked as
// onnx_bytes_fuzz checks it.
#include <onnx/onnx_pb.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "onnx_model_checks.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t maxSize);

namespace {

using Rng = std::minstd_rand;

size_t pick(Rng& rng, size_t n) { return n == 0 ? 0 : rng() % n; }

int64_t interestingInt(Rng& rng) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  static constexpr std::array<int64_t, 18> values = {0,
                                                     1,
                                                     -1,
                                                     2,
                                                     -2,
                                                     3,
                                                     7,
                                                     64,
                                                     4096,
                                                     1 << 20,
                                                     (int64_t{1} << 31) - 1,
                                                     int64_t{1} << 31,
                                                     int64_t{1} << 32,
                                                     1000000000000,
                                                     kMax,
                                                     kMin,
                                                     kMax - 1,
                                                     kMin + 1};
  return rng() % 2 ? values[pick(rng, values.size())] : static_cast<int64_t>(rng() % 9) - 2;
}

float interestingFloat(Rng& rng) {
  static constexpr std::array<float, 9> values = {0.f,
                                                  -1.f,
                                                  1.f,
                                                  0.5f,
                                                  1e30f,
                                                  -1e-30f,
                                                  std::numeric_limits<float>::infinity(),
                                                  std::numeric_limits<float>::quiet_NaN(),
                                                  1e9f};
  return values[pick(rng, values.size())];
}

// Operators the mutator may turn a node into (besides those the model already has): the ones
// with attribute-driven shape rules, where a mismatched node finds the gaps in the checks.
constexpr std::array<const char*, 48> kOpTypes = {"Add",
                                                  "Relu",
                                                  "Conv",
                                                  "ConvTranspose",
                                                  "MaxPool",
                                                  "AveragePool",
                                                  "GlobalAveragePool",
                                                  "BatchNormalization",
                                                  "Gemm",
                                                  "MatMul",
                                                  "Reshape",
                                                  "Flatten",
                                                  "Transpose",
                                                  "Concat",
                                                  "Split",
                                                  "Slice",
                                                  "Gather",
                                                  "GatherElements",
                                                  "GatherND",
                                                  "ScatterND",
                                                  "Pad",
                                                  "Expand",
                                                  "Tile",
                                                  "Squeeze",
                                                  "Unsqueeze",
                                                  "Shape",
                                                  "Size",
                                                  "Range",
                                                  "ConstantOfShape",
                                                  "OneHot",
                                                  "TopK",
                                                  "ReduceSum",
                                                  "ReduceMean",
                                                  "Softmax",
                                                  "Resize",
                                                  "Cast",
                                                  "Where",
                                                  "NonZero",
                                                  "Einsum",
                                                  "DepthToSpace",
                                                  "SpaceToDepth",
                                                  "LayerNormalization",
                                                  "InstanceNormalization",
                                                  "If",
                                                  "Loop",
                                                  "Scan",
                                                  "CumSum",
                                                  "Trilu"};
constexpr std::array<const char*, 16> kAttributeNames = {
    "axis", "axes",  "perm",     "kernel_shape", "strides",     "pads", "dilations", "group",
    "to",   "split", "keepdims", "blocksize",    "num_outputs", "k",    "upper",     "epsilon"};

class ModelMutator {
 public:
  ModelMutator(onnx::ModelProto& model, unsigned seed) : model_(model), rng_(seed) {}

  void mutate() {
    // Collected again each time: the last mutation may have deleted a node holding a subgraph.
    graphs_.clear();
    collectGraphs(*model_.mutable_graph());
    onnx::GraphProto& g = *graphs_[pick(rng_, graphs_.size())];
    switch (rng_() % 11) {
      case 0:
        mutateValueInfoDims(g);
        break;
      case 1:
        mutateElementType(g);
        break;
      case 2:
        mutateInitializerDims(g);
        break;
      case 3:
        mutateAttribute(g);
        break;
      case 4:
        mutateNodeNames(g, true);
        break;
      case 5:
        mutateNodeNames(g, false);
        break;
      case 6:
        mutateOpType(g);
        break;
      case 7:
        mutateNodeList(g);
        break;
      case 8:
        mutateOpset();
        break;
      case 9:
        addAttribute(g);
        break;
      default:
        mutateInitializerBytes(g);
        break;
    }
  }

 private:
  void collectGraphs(onnx::GraphProto& g) {
    graphs_.push_back(&g);
    for (onnx::NodeProto& node : *g.mutable_node()) {
      for (onnx::AttributeProto& a : *node.mutable_attribute()) {
        if (a.has_g()) collectGraphs(*a.mutable_g());
        for (onnx::GraphProto& sub : *a.mutable_graphs()) collectGraphs(sub);
      }
    }
  }

  std::vector<onnx::ValueInfoProto*> valueInfos(onnx::GraphProto& g) {
    std::vector<onnx::ValueInfoProto*> infos;
    for (auto* list : {g.mutable_input(), g.mutable_output(), g.mutable_value_info()})
      for (onnx::ValueInfoProto& v : *list) infos.push_back(&v);
    return infos;
  }

  std::string anyName(onnx::GraphProto& g) {
    std::vector<const std::string*> names;
    for (onnx::ValueInfoProto* v : valueInfos(g)) names.push_back(&v->name());
    for (const onnx::TensorProto& t : g.initializer()) names.push_back(&t.name());
    for (const onnx::NodeProto& n : g.node())
      for (const std::string& o : n.output()) names.push_back(&o);
    if (names.empty() || rng_() % 8 == 0) return rng_() % 2 ? "" : "no_such_tensor";
    return *names[pick(rng_, names.size())];
  }

  void mutateDims(google::protobuf::RepeatedField<int64_t>& dims) {
    const unsigned what = rng_() % 4;
    if (what == 0 || dims.empty()) {
      dims.Add(interestingInt(rng_));
    } else if (what == 1) {
      dims.RemoveLast();
    } else {
      dims.Set(static_cast<int>(pick(rng_, dims.size())), interestingInt(rng_));
    }
  }

  void mutateValueInfoDims(onnx::GraphProto& g) {
    auto infos = valueInfos(g);
    if (infos.empty()) return;
    onnx::TypeProto_Tensor& t =
        *infos[pick(rng_, infos.size())]->mutable_type()->mutable_tensor_type();
    onnx::TensorShapeProto& shape = *t.mutable_shape();
    const unsigned what = rng_() % 5;
    if (what == 0 || shape.dim_size() == 0) {
      shape.add_dim()->set_dim_value(interestingInt(rng_));
    } else if (what == 1) {
      shape.mutable_dim()->RemoveLast();
    } else if (what == 2) {
      shape.mutable_dim(static_cast<int>(pick(rng_, shape.dim_size())))
          ->set_dim_param(rng_() % 2 ? "n" : "");
    } else if (what == 3) {
      t.clear_shape();
    } else {
      shape.mutable_dim(static_cast<int>(pick(rng_, shape.dim_size())))
          ->set_dim_value(interestingInt(rng_));
    }
  }

  int32_t anyElementType() {
    return rng_() % 8 == 0 ? static_cast<int32_t>(interestingInt(rng_))
                           : static_cast<int32_t>(rng_() % 27);
  }

  void mutateElementType(onnx::GraphProto& g) {
    if (rng_() % 2 && g.initializer_size() > 0) {
      g.mutable_initializer(static_cast<int>(pick(rng_, g.initializer_size())))
          ->set_data_type(anyElementType());
      return;
    }
    auto infos = valueInfos(g);
    if (!infos.empty())
      infos[pick(rng_, infos.size())]->mutable_type()->mutable_tensor_type()->set_elem_type(
          anyElementType());
  }

  void mutateInitializerDims(onnx::GraphProto& g) {
    if (g.initializer_size() == 0) return;
    mutateDims(
        *g.mutable_initializer(static_cast<int>(pick(rng_, g.initializer_size())))->mutable_dims());
  }

  onnx::NodeProto* anyNode(onnx::GraphProto& g) {
    return g.node_size() == 0 ? nullptr
                              : g.mutable_node(static_cast<int>(pick(rng_, g.node_size())));
  }

  void setAttributeValue(onnx::AttributeProto& a) {
    switch (a.type()) {
      case onnx::AttributeProto::INT:
        a.set_i(interestingInt(rng_));
        break;
      case onnx::AttributeProto::FLOAT:
        a.set_f(interestingFloat(rng_));
        break;
      case onnx::AttributeProto::INTS:
        mutateDims(*a.mutable_ints());
        break;
      case onnx::AttributeProto::FLOATS:
        if (a.floats_size() > 0 && rng_() % 2)
          a.set_floats(static_cast<int>(pick(rng_, a.floats_size())), interestingFloat(rng_));
        else
          a.add_floats(interestingFloat(rng_));
        break;
      case onnx::AttributeProto::STRING:
        a.set_s(rng_() % 2 ? "" : "nearest");
        break;
      case onnx::AttributeProto::TENSOR:
        mutateDims(*a.mutable_t()->mutable_dims());
        break;
      default:
        a.set_type(static_cast<onnx::AttributeProto::AttributeType>(rng_() % 15));
        break;
    }
  }

  void mutateAttribute(onnx::GraphProto& g) {
    onnx::NodeProto* node = anyNode(g);
    if (!node || node->attribute_size() == 0) return;
    onnx::AttributeProto& a =
        *node->mutable_attribute(static_cast<int>(pick(rng_, node->attribute_size())));
    if (rng_() % 6 == 0) {
      a.set_type(static_cast<onnx::AttributeProto::AttributeType>(rng_() % 15));
    } else {
      setAttributeValue(a);
    }
  }

  void addAttribute(onnx::GraphProto& g) {
    onnx::NodeProto* node = anyNode(g);
    if (!node) return;
    onnx::AttributeProto& a = *node->add_attribute();
    a.set_name(kAttributeNames[pick(rng_, kAttributeNames.size())]);
    if (rng_() % 2) {
      a.set_type(onnx::AttributeProto::INT);
      a.set_i(interestingInt(rng_));
    } else {
      a.set_type(onnx::AttributeProto::INTS);
      for (unsigned k = rng_() % 5; k > 0; --k) a.add_ints(interestingInt(rng_));
    }
  }

  void mutateNodeNames(onnx::GraphProto& g, bool inputs) {
    onnx::NodeProto* node = anyNode(g);
    if (!node) return;
    auto& names = inputs ? *node->mutable_input() : *node->mutable_output();
    const unsigned what = rng_() % 4;
    if (what == 0 || names.empty()) {
      *names.Add() = anyName(g);
    } else if (what == 1) {
      names.RemoveLast();
    } else {
      *names.Mutable(static_cast<int>(pick(rng_, names.size()))) = anyName(g);
    }
  }

  void mutateOpType(onnx::GraphProto& g) {
    onnx::NodeProto* node = anyNode(g);
    if (!node) return;
    if (rng_() % 2 && g.node_size() > 1) {
      node->set_op_type(g.node(static_cast<int>(pick(rng_, g.node_size()))).op_type());
    } else {
      node->set_op_type(kOpTypes[pick(rng_, kOpTypes.size())]);
    }
  }

  void mutateNodeList(onnx::GraphProto& g) {
    if (g.node_size() == 0) return;
    const int i = static_cast<int>(pick(rng_, g.node_size()));
    const int j = static_cast<int>(pick(rng_, g.node_size()));
    switch (rng_() % 3) {
      case 0:
        g.mutable_node()->SwapElements(i, j);
        break;
      case 1:
        *g.add_node() = g.node(i);
        break;
      default:
        g.mutable_node()->DeleteSubrange(i, 1);
        break;
    }
  }

  void mutateOpset() {
    if (model_.opset_import_size() == 0) {
      model_.add_opset_import()->set_version(rng_() % 24);
      return;
    }
    onnx::OperatorSetIdProto& op =
        *model_.mutable_opset_import(static_cast<int>(pick(rng_, model_.opset_import_size())));
    op.set_version(rng_() % 4 == 0 ? interestingInt(rng_) : static_cast<int64_t>(rng_() % 24));
  }

  void mutateInitializerBytes(onnx::GraphProto& g) {
    if (g.initializer_size() == 0) return;
    std::string& raw = *g.mutable_initializer(static_cast<int>(pick(rng_, g.initializer_size())))
                            ->mutable_raw_data();
    const size_t maxSize = raw.size() + 16;
    raw.resize(maxSize);
    raw.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(raw.data()), maxSize - 16, maxSize));
  }

  onnx::ModelProto& model_;
  Rng rng_;
  std::vector<onnx::GraphProto*> graphs_;
};

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  onnx::ModelProto model;
  if (size == 0 || !model.ParseFromArray(data, static_cast<int>(size)) || !model.has_graph()) {
    return LLVMFuzzerMutate(data, size, maxSize);
  }
  ModelMutator mutator(model, seed);
  for (unsigned n = 1 + seed % 3; n > 0; --n) mutator.mutate();
  const std::string bytes = model.SerializeAsString();
  if (bytes.size() > maxSize) return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}
