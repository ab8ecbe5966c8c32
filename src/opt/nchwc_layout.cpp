// convertToNchwcLayout: runs the convolutions in the blocked NCHWc layout (ir/ops/nchwc.h) and
// keeps their outputs blocked through the ops between convolutions, as ONNX Runtime's
// NchwcTransformer does. Nodes are visited in topological order; each value that gets a blocked
// form remembers it (its "twin"), so a chain Conv -> Relu -> Conv -> Add -> Conv reads one
// ReorderToNchwc at its start and one ReorderFromNchwc where a plain consumer or a graph output
// needs NCHW again.
//
// A converted node writes a new blocked value; its original NCHW output keeps its id and name and
// is produced later, by a ReorderFromNchwc, only if something still reads it in NCHW.
#include <algorithm>
#include <map>

#include "ir/node_attrs.h"
#include "ir/op_schema.h"
#include "ir/ops/nchwc.h"
#include "opt/layout_rewriter.h"
#include "opt/nchwc_rules.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

using ir::kNchwcBlock;
using ir::kNoValue;

class NchwcRewriter : public LayoutRewriter {
 public:
  explicit NchwcRewriter(ir::Graph& graph)
      : LayoutRewriter(graph), twin_(graph.values.size()), pending_(graph.values.size(), false) {}

 private:
  struct Twin {
    int id = kNoValue;
    int64_t channels = 0;
  };

  bool hasTwin(int id) const {
    return id >= 0 && static_cast<size_t>(id) < twin_.size() &&
           twin_[static_cast<size_t>(id)].id != kNoValue;
  }
  const Twin& twinOf(int id) const { return twin_[static_cast<size_t>(id)]; }

  bool convert(ir::Node& node) override {
    if (node.plugin || node.explicitInputs >= 0 || node.inputs.empty() ||
        node.inputs[0] == kNoValue)
      return false;
    bool done = false;
    if (wantsNchwc(g_, node)) {
      done = convertConv(node);
    } else if (node.domain.empty()) {
      const std::string& op = node.opType;
      if (isBlockedUnaryOp(op))
        done = convertUnary(node);
      else if (isBlockedBinaryOp(op))
        done = convertBinary(node);
      else if (op == "Concat")
        done = convertConcat(node);
      else if (op == "MaxPool" || op == "AveragePool")
        done = convertPool(node);
      else if (op == "Resize")
        done = convertResize(node);
      else if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "ReduceMean" ||
               op == "ReduceMax") {
        done = convertGlobalPool(node);
      }
    }
    return done;
  }

  // Conv / FusedConv -> NchwcConv: X blocked (or plain for a few input channels), Z blocked.
  bool convertConv(ir::Node& node) {
    const int x = node.inputs[0];
    const int64_t inChannels = *nchwChannels(g_, x);
    const int64_t outChannels = g_.value(node.inputs[1]).constant->dim(0);
    const int z = node.inputs.size() > 3 ? node.inputs[3] : kNoValue;
    if (z != kNoValue && !(hasTwin(z) && twinOf(z).channels == outChannels) &&
        nchwChannels(g_, z) != outChannels) {
      return false;
    }
    const bool grouped = ir::attrInt(node, "group", 1) != 1;  // depthwise or grouped: X blocked
    const bool plainX = !grouped && !hasTwin(x) && inChannels < kMinBlockedInputChannels;
    std::vector<int> inputs = {plainX ? x : blocked(x, inChannels), node.inputs[1]};
    inputs.push_back(node.inputs.size() > 2 ? node.inputs[2] : kNoValue);
    inputs.push_back(z == kNoValue ? kNoValue : blocked(z, outChannels));
    while (inputs.back() == kNoValue) inputs.pop_back();
    node.domain = "kiln";
    node.opType = "NchwcConv";
    node.opset = 1;
    node.inputs = std::move(inputs);
    setBlockedOutput(node, outChannels);
    return true;
  }

  // Relu, Sigmoid, Clip, ...: input 0 blocked, the other inputs (Clip's bounds) stay as they are.
  bool convertUnary(ir::Node& node) {
    const int x = node.inputs[0];
    if (!hasTwin(x) || node.outputs.size() != 1 || !isFloat32(g_, node.outputs[0])) return false;
    if (nchwChannels(g_, node.outputs[0]) != twinOf(x).channels) return false;
    for (size_t i = 1; i < node.inputs.size(); ++i) requireOriginal(node.inputs[i]);
    node.inputs[0] = twinOf(x).id;
    setBlockedOutput(node, twinOf(x).channels);
    return true;
  }

  // Add, Mul, ...: every operand blocked with the output's channels, or something that broadcasts
  // the same way in the blocked layout (one element; a constant; a plain NCHW tensor, reordered).
  bool convertBinary(ir::Node& node) {
    if (node.outputs.size() != 1 || !isFloat32(g_, node.outputs[0])) return false;
    const std::optional<int64_t> channels = nchwChannels(g_, node.outputs[0]);
    if (!channels) return false;
    std::vector<OperandForm> forms;
    bool anyBlocked = false;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int id = node.inputs[i];
      const OperandForm form = hasTwin(id) && twinOf(id).channels == *channels
                                   ? OperandForm::kBlocked
                                   : plainOperandForm(g_, id, *channels);
      if (form == OperandForm::kUnsupported) return false;
      if (node.opType == "PRelu" && i == 0 && form != OperandForm::kBlocked) return false;
      anyBlocked = anyBlocked || form == OperandForm::kBlocked;
      forms.push_back(form);
    }
    if (!anyBlocked) return false;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      int& id = node.inputs[i];
      switch (forms[i]) {
        case OperandForm::kBlocked:
          id = twinOf(id).id;
          break;
        case OperandForm::kOneElement:
          requireOriginal(id);
          break;
        case OperandForm::kConstant:
          id = blockedConstantOf(id);
          break;
        case OperandForm::kReorder:
          id = blocked(id, *channels);
          break;
        case OperandForm::kUnsupported:
          break;
      }
    }
    setBlockedOutput(node, *channels);
    return true;
  }

  // Concat on channels: blocks concatenate when no input but the last has a partly filled block.
  bool convertConcat(ir::Node& node) {
    if (node.outputs.size() != 1 || node.inputs.empty()) return false;
    const int64_t axis = ir::attrInt(node, "axis", 1);
    if (axis != 1 && axis != -3) return false;
    int64_t channels = 0;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int id = node.inputs[i];
      if (!hasTwin(id)) return false;
      if (i + 1 < node.inputs.size() && twinOf(id).channels % kNchwcBlock != 0) return false;
      channels += twinOf(id).channels;
    }
    if (nchwChannels(g_, node.outputs[0]) != channels) return false;
    for (int& id : node.inputs) id = twinOf(id).id;
    node.attrs["axis"] = int64_t{1};
    setBlockedOutput(node, channels);
    return true;
  }

  // MaxPool / AveragePool (2-D, no Indices) -> NchwcMaxPool / NchwcAveragePool.
  bool convertPool(ir::Node& node) {
    const int x = node.inputs[0];
    if (!hasTwin(x) || node.outputs.empty() || node.outputs[0] == kNoValue) return false;
    if (node.outputs.size() > 1 && node.outputs[1] != kNoValue) return false;
    if (!ir::hasAttr(node, "kernel_shape") || ir::attrInts(node, "kernel_shape").size() != 2)
      return false;
    if (nchwChannels(g_, node.outputs[0]) != twinOf(x).channels) return false;
    node.domain = "kiln";
    node.opType = node.opType == "MaxPool" ? "NchwcMaxPool" : "NchwcAveragePool";
    node.opset = 1;
    node.attrs.erase("storage_order");
    node.outputs.resize(1);
    node.inputs = {twinOf(x).id};
    setBlockedOutput(node, twinOf(x).channels);
    return true;
  }

  // Resize of H and W only, by constant scales or sizes (a detector neck's upsampling before a
  // Concat) -> Resize of the blocked tensor, its scales or sizes given the block's axis (scale 1,
  // size 16); the kernel's passes then move 16-channel vectors. Not where the output is a graph
  // output: its reorder would then move the larger, resized map (a segmentation head's).
  bool convertResize(ir::Node& node) {
    const int x = node.inputs[0];
    if (!hasTwin(x) || node.outputs.size() != 1 || isGraphOutput(g_, node.outputs[0]) ||
        node.opset < 11 || node.inputs.size() < 3 || ir::hasAttr(node, "axes") ||
        ir::attrString(node, "coordinate_transformation_mode", "half_pixel") ==
            "tf_crop_and_resize" ||
        ir::attrString(node, "keep_aspect_ratio_policy", "stretch") != "stretch")
      return false;
    const std::optional<int64_t> channels = nchwChannels(g_, node.outputs[0]);
    if (channels != twinOf(x).channels) return false;
    const Tensor* scales = constantValue(g_, node.inputs[2]);
    const Tensor* sizes = node.inputs.size() > 3 ? constantValue(g_, node.inputs[3]) : nullptr;
    // roi is read only by tf_crop_and_resize; Resize-11 still requires the input (empty then).
    const int roi = node.opset >= 13 ? kNoValue
                                     : addConstant(g_, node.name + "_nchwc_roi",
                                                   Tensor(DataType::kFloat32, Shape{0}));
    std::vector<int> inputs = {twinOf(x).id, roi};
    if (scales && scales->numel() == 4 && scales->dtype() == DataType::kFloat32) {
      const float* v = scales->data<float>();
      if (v[0] != 1.0f || v[1] != 1.0f) return false;
      inputs.push_back(addConstant(
          g_, node.name + "_nchwc_scales",
          Tensor::fromVector<float>(DataType::kFloat32, {5}, {1.0f, 1.0f, v[2], v[3], 1.0f})));
    } else if (sizes && sizes->numel() == 4 && sizes->dtype() == DataType::kInt64) {
      const int64_t* v = sizes->data<int64_t>();
      const auto& in = g_.value(x).type.shape;
      if (!in || in->size() != 4 || (*in)[0].value != v[0] || v[1] != *channels) return false;
      inputs.push_back(kNoValue);
      inputs.push_back(addConstant(
          g_, node.name + "_nchwc_sizes",
          Tensor::fromVector<int64_t>(DataType::kInt64, {5},
                                      {v[0], ir::nchwcBlocks(v[1]), v[2], v[3], kNchwcBlock})));
    } else {
      return false;
    }
    node.inputs = std::move(inputs);
    setBlockedOutput(node, *channels);
    return true;
  }

  // GlobalAveragePool / GlobalMaxPool, or ReduceMean / ReduceMax over H and W keeping dims ->
  // NchwcGlobalAveragePool / NchwcGlobalMaxPool.
  bool convertGlobalPool(ir::Node& node) {
    const int x = node.inputs[0];
    if (!hasTwin(x) || node.outputs.size() != 1) return false;
    if (nchwChannels(g_, node.outputs[0]) != twinOf(x).channels) return false;
    const bool isReduce = node.opType.rfind("Reduce", 0) == 0;
    if (isReduce && !reducesSpatialKeepingDims(g_, node)) return false;
    const bool isMax = node.opType == "GlobalMaxPool" || node.opType == "ReduceMax";
    node.domain = "kiln";
    node.opType = isMax ? "NchwcGlobalMaxPool" : "NchwcGlobalAveragePool";
    node.opset = 1;
    for (const char* attr : {"axes", "keepdims", "noop_with_empty_axes"}) node.attrs.erase(attr);
    node.inputs = {twinOf(x).id};
    setBlockedOutput(node, twinOf(x).channels);
    return true;
  }

  // Points the node's output 0 at a new blocked value; the NCHW value waits for a plain reader.
  void setBlockedOutput(ir::Node& node, int64_t channels) {
    const int plain = node.outputs[0];
    const int id = newValue(g_.value(plain).name + "_nchwc", DataType::kFloat32);
    node.outputs[0] = id;
    twin_[static_cast<size_t>(plain)] = Twin{id, channels};
    pending_[static_cast<size_t>(plain)] = true;
  }

  // The blocked form of a plain NCHW value, reordering it the first time it is asked for.
  int blocked(int id, int64_t channels) {
    if (hasTwin(id)) return twinOf(id).id;
    const int twin = newValue(g_.value(id).name + "_nchwc", DataType::kFloat32);
    ir::Node reorder;
    reorder.name = newNodeName(g_.value(id).name + "_to_nchwc");
    reorder.domain = "kiln";
    reorder.opType = "ReorderToNchwc";
    reorder.opset = 1;
    reorder.inputs = {id};
    reorder.outputs = {twin};
    out_.push_back(std::move(reorder));
    twin_[static_cast<size_t>(id)] = Twin{twin, channels};
    return twin;
  }

  // The blocked copy of a constant operand, made once per constant.
  int blockedConstantOf(int id) {
    auto it = constantTwins_.find(id);
    if (it != constantTwins_.end()) return it->second;
    const int twin =
        addConstant(g_, g_.value(id).name + "_nchwc", blockConstant(*constantValue(g_, id)));
    constantTwins_.emplace(id, twin);
    return twin;
  }

  // Makes the NCHW form of a converted node's output before its first plain reader.
  void requireOriginal(int id) override {
    if (id < 0 || static_cast<size_t>(id) >= pending_.size() || !pending_[static_cast<size_t>(id)])
      return;
    ir::Node reorder;
    reorder.name = newNodeName(g_.value(id).name + "_from_nchwc");
    reorder.domain = "kiln";
    reorder.opType = "ReorderFromNchwc";
    reorder.opset = 1;
    reorder.inputs = {twinOf(id).id};
    reorder.outputs = {id};
    reorder.attrs["channels"] = twinOf(id).channels;
    out_.push_back(std::move(reorder));
    pending_[static_cast<size_t>(id)] = false;
  }

  std::vector<Twin> twin_;     // per value of the original graph: its blocked form, if any
  std::vector<bool> pending_;  // its producer was converted and no NCHW copy was made yet
  std::map<int, int> constantTwins_;
};

}  // namespace

int convertToNchwcLayout(ir::Graph& graph) { return NchwcRewriter(graph).run(); }

}  // namespace kiln::opt
