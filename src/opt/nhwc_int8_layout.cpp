// convertToNhwcInt8Layout: runs the 8-bit convolutions (kiln::QConv) channels-last, where a
// channels-last kernel takes them (the direct NHWC convolution, backends/cpu/qgemm/qconv_nhwc.h:
// no im2col, no per-call packing; the channel-vectorized depthwise one), and keeps their outputs
// channels-last through the quantized ops between them (QLinearAdd / QLinearMul, per-channel
// scales included, QLinearLookup, QLinearGlobalAveragePool), as ONNX Runtime's NhwcTransformer does
// for QLinearConv. The bookkeeping is nchwc_layout.cpp's (layout_rewriter.h): nodes in topological
// order, each value with a channels-last form remembers it (its twin), a Transpose to [N, H, W, C]
// where a channels-first value enters and one back where a channels-first reader or a graph output
// needs it. ResNet-50 then transposes once after its stem and once at its global pooling.
#include <algorithm>
#include <string>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel_registry.h"
#include "ir/node_attrs.h"
#include "ir/op_schema.h"
#include "opt/layout_rewriter.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

using ir::kNoValue;

// Whether one of the kernel registry's channels-last candidates (the direct NHWC convolution,
// the channel-vectorized depthwise one) would run this QConv as channels-last on this CPU.
bool nhwcKernelTakes(const ir::Graph& g, const ir::Node& node) {
  if (node.domain != "kiln" || node.opType != "QConv" || node.inputs.empty() ||
      node.inputs[0] == kNoValue || ir::attrInt(node, "channels_last", 0) != 0)
    return false;
  const ir::TypeInfo& x = g.value(node.inputs[0]).type;
  const bool eightBit = x.dtype == DataType::kUint8 || x.dtype == DataType::kInt8;
  if (!eightBit || !x.shape || x.shape->size() != 4) return false;
  ir::Node asLast = node;
  asLast.attrs["channels_last"] = int64_t{1};
  ir::TypeInfo xLast = x;
  std::rotate(xLast.shape->begin() + 1, xLast.shape->begin() + 2, xLast.shape->end());
  cpu::KernelCreateInfo info{asLast, {}, {}, {}, nullptr};
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const int id = node.inputs[i];
    info.inputTypes.push_back(id == kNoValue ? nullptr : i == 0 ? &xLast : &g.value(id).type);
    info.constants.push_back(id == kNoValue ? nullptr : constantValue(g, id));
  }
  const std::string prefix = x.dtype == DataType::kInt8 ? "s8s8_qconv" : "u8s8_qconv";
  for (const char* kind : {"_nhwc_avx512vnni", "_depthwise_avx512"}) {
    const cpu::KernelCandidate* c = cpu::KernelRegistry::global().findById(info, prefix + kind);
    if (c && cpu::cpuHas(c->isa) && c->supports(info).empty()) return true;
  }
  return false;
}

// [N, C, H, W] <-> [N, H, W, C].
const std::vector<int64_t> kToLast = {0, 2, 3, 1}, kToFirst = {0, 3, 1, 2};

class NhwcInt8Rewriter : public LayoutRewriter {
 public:
  explicit NhwcInt8Rewriter(ir::Graph& graph)
      : LayoutRewriter(graph),
        twin_(graph.values.size(), kNoValue),
        pending_(graph.values.size(), false) {}

 private:
  bool hasTwin(int id) const {
    return id >= 0 && static_cast<size_t>(id) < twin_.size() &&
           twin_[static_cast<size_t>(id)] != kNoValue;
  }
  int twinOf(int id) const { return twin_[static_cast<size_t>(id)]; }

  bool convert(ir::Node& node) override {
    if (node.plugin || node.explicitInputs >= 0) return false;
    if (node.domain.empty() && node.opType == "MaxPool") return convertMaxPool(node);
    if (node.domain != "kiln") return false;
    bool done = false;
    if (nhwcKernelTakes(g_, node)) {
      done = convertConv(node);
    } else if (node.opType == "QLinearAdd" || node.opType == "QLinearMul") {
      done = convertBinary(node);
    } else if (node.opType == "QLinearGlobalAveragePool") {
      done = convertGlobalPool(node);
    } else if (node.opType == "QLinearLookup") {
      done = convertLookup(node);
    } else if (node.opType == "QLinearConcat") {
      done = convertConcat(node);
    }
    return done;
  }

  bool convertConv(ir::Node& node) {
    for (size_t i = 1; i < node.inputs.size(); ++i) requireOriginal(node.inputs[i]);
    node.inputs[0] = channelsLast(node.inputs[0]);
    node.attrs["channels_last"] = int64_t{1};
    setLastOutput(node);
    return true;
  }

  // Whether an operand of a [N, C, H, W] output broadcasts the same way channels-last: it has the
  // output's shape, or it is [N, C, 1, 1] (a squeeze-and-excitation scale), [N, 1, 1, C] then.
  bool broadcastsChannelsLast(int operand, int y) const {
    if (sameKnownShape(g_, operand, y)) return true;
    const auto& a = g_.value(operand).type.shape;
    const auto& b = g_.value(y).type.shape;
    if (!a || !b || a->size() != 4 || b->size() != 4) return false;
    const auto one = [](const ir::Dim& d) { return d.isKnown() && d.value == 1; };
    const auto same = [](const ir::Dim& d, const ir::Dim& e) { return d.isKnown() && d == e; };
    return same((*a)[0], (*b)[0]) && same((*a)[1], (*b)[1]) && one((*a)[2]) && one((*a)[3]);
  }

  // A and B (inputs 0 and 3) channels-last, of the output's shape or per channel.
  bool convertBinary(ir::Node& node) {
    if (node.inputs.size() < 4 || node.outputs.size() != 1) return false;
    const int a = node.inputs[0], b = node.inputs[3];
    if (!hasTwin(a) && !hasTwin(b)) return false;
    const int y = node.outputs[0];
    if (!broadcastsChannelsLast(a, y) || !broadcastsChannelsLast(b, y)) return false;
    for (size_t i : {1, 2, 4, 5, 6, 7}) {
      if (i < node.inputs.size()) requireOriginal(node.inputs[i]);
    }
    node.inputs[0] = channelsLast(a);
    node.inputs[3] = channelsLast(b);
    setLastOutput(node);
    return true;
  }

  bool convertGlobalPool(ir::Node& node) {
    const int x = node.inputs[0];
    if (!hasTwin(x) || node.outputs.size() != 1) return false;
    for (size_t i = 1; i < node.inputs.size(); ++i) requireOriginal(node.inputs[i]);
    node.inputs[0] = twinOf(x);
    node.attrs["channels_last"] = int64_t{1};
    setLastOutput(node);
    return true;
  }

  // A table lookup is elementwise: it runs on whichever layout X has.
  bool convertLookup(ir::Node& node) {
    const int x = node.inputs[0];
    if (!hasTwin(x) || node.inputs.size() != 2 || node.outputs.size() != 1) return false;
    requireOriginal(node.inputs[1]);
    node.inputs[0] = twinOf(x);
    setLastOutput(node);
    return true;
  }

  // Along the channels (axis 1 of a 4-D output), on channels-last inputs: along axis 3.
  bool convertConcat(ir::Node& node) {
    const int y = node.outputs.size() == 1 ? node.outputs[0] : kNoValue;
    const auto& shape = y == kNoValue ? std::nullopt : g_.value(y).type.shape;
    if (!shape || shape->size() != 4) return false;
    const int64_t axis = ir::attrInt(node, "axis", 1);
    if (axis != 1 && axis != -3) return false;
    bool anyTwin = false;
    for (size_t i = 2; i < node.inputs.size(); i += 3) anyTwin = anyTwin || hasTwin(node.inputs[i]);
    if (!anyTwin) return false;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (i >= 2 && (i - 2) % 3 == 0) {
        node.inputs[i] = channelsLast(node.inputs[i]);
      } else {
        requireOriginal(node.inputs[i]);
      }
    }
    node.attrs["axis"] = int64_t{3};
    setLastOutput(node);
    return true;
  }

  // An 8-bit 2-D MaxPool (no Indices) of a channels-last tensor: com.microsoft's NhwcMaxPool.
  bool convertMaxPool(ir::Node& node) {
    const int x = node.inputs.empty() ? kNoValue : node.inputs[0];
    if (!hasTwin(x) || node.outputs.size() != 1) return false;
    const DataType t = g_.value(x).type.dtype;
    const auto& shape = g_.value(x).type.shape;
    if ((t != DataType::kUint8 && t != DataType::kInt8) || !shape || shape->size() != 4)
      return false;
    node.domain = "com.microsoft";
    node.opType = "NhwcMaxPool";
    node.opset = 1;
    node.attrs.erase("storage_order");
    node.inputs[0] = twinOf(x);
    setLastOutput(node);
    return true;
  }

  // Points the node's output 0 at a new channels-last value; the channels-first value waits for a
  // reader that needs it.
  void setLastOutput(ir::Node& node) {
    const int first = node.outputs[0];
    const int id = newValue(g_.value(first).name + "_nhwc", g_.value(first).type.dtype);
    node.outputs[0] = id;
    twin_[static_cast<size_t>(first)] = id;
    pending_[static_cast<size_t>(first)] = true;
  }

  // The channels-last form of a value, transposing it the first time it is asked for.
  int channelsLast(int id) {
    if (hasTwin(id)) return twinOf(id);
    const int twin = newValue(g_.value(id).name + "_nhwc", g_.value(id).type.dtype);
    out_.push_back(transpose(g_.value(id).name + "_to_nhwc", id, twin, kToLast));
    twin_[static_cast<size_t>(id)] = twin;
    return twin;
  }

  // Makes the channels-first form of a converted node's output before its first such reader.
  void requireOriginal(int id) override {
    if (id < 0 || static_cast<size_t>(id) >= pending_.size() || !pending_[static_cast<size_t>(id)])
      return;
    out_.push_back(transpose(g_.value(id).name + "_from_nhwc", twinOf(id), id, kToFirst));
    pending_[static_cast<size_t>(id)] = false;
  }

  ir::Node transpose(const std::string& name, int in, int out, const std::vector<int64_t>& perm) {
    ir::Node t;
    t.name = newNodeName(name);
    t.opType = "Transpose";
    t.opset = 13;
    t.inputs = {in};
    t.outputs = {out};
    t.attrs["perm"] = perm;
    return t;
  }

  std::vector<int> twin_;      // per value of the original graph: its channels-last form, if any
  std::vector<bool> pending_;  // its producer was converted and no channels-first copy was made
};

}  // namespace

int convertToNhwcInt8Layout(ir::Graph& graph) { return NhwcInt8Rewriter(graph).run(); }

}  // namespace kiln::opt
