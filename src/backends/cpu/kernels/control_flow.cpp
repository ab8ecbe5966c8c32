// Control-flow kernels: If, Loop and Scan run their subgraphs with a SubgraphRunner made once per
// node at build time, by the factory the kernel's creator passes in KernelCreateInfo::subgraphs. A
// node's implicit inputs (past node.explicitInputs) are the outer-scope values its subgraphs read;
// they bind positionally to each subgraph's outerInputs.
#include <memory>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/run_control.h"
#include "backends/cpu/subgraph_runner.h"

namespace kiln::cpu {

namespace {

// The outer-scope values the bodies read: the node's inputs after its `explicitInputs` declared
// ones.
std::vector<const Tensor*> implicitInputs(const KernelContext& ctx, size_t explicitInputs) {
  std::vector<const Tensor*> outer;
  for (size_t i = explicitInputs; i < ctx.numInputs(); ++i)
    outer.push_back(ctx.hasInput(i) ? &ctx.input(i) : nullptr);
  return outer;
}

bool isTrue(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1)
    ctx.fail(std::string(what) + " must have exactly one element, got " + t.describe());
  return t.intAt(0) != 0;
}

// Element `index` of `t` along `axis`: a tensor of rank - 1.
Tensor sliceAlong(const Tensor& t, size_t axis, int64_t index) {
  Shape shape = t.shape();
  const int64_t outer = dimProduct(shape, 0, axis), length = shape[axis];
  const int64_t inner = dimProduct(shape, axis + 1, shape.size());
  shape.erase(shape.begin() + static_cast<int64_t>(axis));
  Tensor out(t.dtype(), shape);
  dispatchStorage(t.dtype(), "Scan", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = t.data<T>();
    T* dst = out.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(src + (o * length + index) * inner, inner, dst + o * inner);
  });
  return out;
}

// Stacks equally shaped parts along a new `axis`; an empty list gives [0] + `emptyShape`.
Tensor stackAlong(const KernelContext& ctx, const std::vector<Tensor>& parts, size_t axis,
                  DataType emptyType, const Shape& emptyShape) {
  if (parts.empty()) {
    Shape shape = emptyShape;
    shape.insert(shape.begin() + static_cast<int64_t>(std::min(axis, shape.size())), 0);
    return Tensor(emptyType, shape);
  }
  const Shape& part = parts[0].shape();
  for (const Tensor& p : parts) {
    if (p.shape() != part || p.dtype() != parts[0].dtype()) {
      ctx.fail("scan output elements differ between iterations: " + parts[0].describe() + " and " +
               p.describe());
    }
  }
  Shape shape = part;
  shape.insert(shape.begin() + static_cast<int64_t>(axis), static_cast<int64_t>(parts.size()));
  Tensor out(parts[0].dtype(), shape);
  const int64_t outer = dimProduct(part, 0, axis), inner = dimProduct(part, axis, part.size());
  const int64_t count = static_cast<int64_t>(parts.size());
  dispatchStorage(out.dtype(), "scan output", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    for (int64_t t = 0; t < count; ++t) {
      const T* src = parts[t].template data<T>();
      for (int64_t o = 0; o < outer; ++o)
        std::copy_n(src + o * inner, inner, dst + (o * count + t) * inner);
    }
  });
  return out;
}

// The declared shape of a body output when fully known (for scan outputs of zero iterations).
Shape declaredShape(const ir::Graph& body, size_t output) {
  const ir::TypeInfo& t = body.value(body.outputs[output]).type;
  auto shape = t.shape ? ir::concreteShape(*t.shape) : std::nullopt;
  return shape ? *shape : Shape{};
}

KernelFn makeIf(const KernelCreateInfo& info) {
  auto thenRunner = makeBodyRunner(info, "then_branch");
  auto elseRunner = makeBodyRunner(info, "else_branch");
  return
      [thenRunner, elseRunner, explicitInputs = info.node.numExplicitInputs()](KernelContext& ctx) {
        const SubgraphRunner& branch =
            isTrue(ctx, ctx.input(0), "the condition") ? *thenRunner : *elseRunner;
        std::vector<Tensor> outs = branch.run({}, implicitInputs(ctx, explicitInputs));
        for (size_t i = 0; i < ctx.numOutputs(); ++i)
          if (ctx.wantsOutput(i)) ctx.setOutput(i, std::move(outs.at(i)));
      };
}

KernelFn makeLoop(const KernelCreateInfo& info) {
  auto body = makeBodyRunner(info, "body");
  return [body, explicitInputs = info.node.numExplicitInputs(),
          name = info.node.name](KernelContext& ctx) {
    const size_t carried = explicitInputs - 2;
    const size_t scans = ctx.numOutputs() - carried;
    const bool hasTripCount = ctx.hasInput(0), hasCond = ctx.hasInput(1);
    if (!hasTripCount && !hasCond)
      ctx.fail("has neither a trip count M nor a condition, so it would never end");
    const int64_t tripCount = hasTripCount ? ctx.input(0).intAt(0) : INT64_MAX;
    bool cond = hasCond ? isTrue(ctx, ctx.input(1), "the condition") : true;
    const int64_t cap = currentRunControl().maxLoopIterations;

    std::vector<Tensor> state(carried + 2);
    for (size_t i = 0; i < carried; ++i) state[2 + i] = ctx.input(2 + i);
    std::vector<std::vector<Tensor>> scanParts(scans);
    const std::vector<const Tensor*> outer = implicitInputs(ctx, explicitInputs);
    for (int64_t iter = 0; iter < tripCount && cond; ++iter) {
      if (terminateRequested())
        throwTerminated("iteration " + std::to_string(iter) + " of Loop '" + name + "'");
      if (cap > 0 && iter == cap) {
        ctx.fail("reached the cap of " + std::to_string(cap) +
                 " iterations per run (SessionOptions::maxLoopIterations) with its condition still "
                 "true");
      }
      state[0] = Tensor::fromVector<int64_t>(DataType::kInt64, {}, {iter});
      state[1] = Tensor::fromVector<uint8_t>(DataType::kBool, {}, {1});
      std::vector<Tensor> outs = body->run(state, outer);
      if (hasCond) cond = isTrue(ctx, outs[0], "the body's condition output");
      for (size_t i = 0; i < carried; ++i) state[2 + i] = std::move(outs[1 + i]);
      for (size_t k = 0; k < scans; ++k) scanParts[k].push_back(std::move(outs[1 + carried + k]));
    }
    for (size_t i = 0; i < carried; ++i) ctx.setOutput(i, std::move(state[2 + i]));
    for (size_t k = 0; k < scans; ++k) {
      const ir::Graph& g = body->graph();
      ctx.setOutput(carried + k,
                    stackAlong(ctx, scanParts[k], 0, g.value(g.outputs[1 + carried + k]).type.dtype,
                               declaredShape(g, 1 + carried + k)));
    }
  };
}

size_t normalizedAxis(const KernelContext& ctx, int64_t axis, size_t rank, const char* what) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    ctx.fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
             std::to_string(rank));
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

struct ScanAttrs {
  std::string name;  // the node's, for the message of a terminated run
  size_t explicitInputs = 0;
  size_t states = 0, scanInputs = 0, scanOutputs = 0;
  std::vector<int64_t> inputAxes, inputReverse, outputAxes, outputReverse;
};

// One scan over `length` steps: inputs are the initial states and the scan inputs; returns the
// final states followed by the scan outputs.
std::vector<Tensor> scanOnce(const KernelContext& ctx, const SubgraphRunner& body,
                             const ScanAttrs& a, std::vector<Tensor> state,
                             const std::vector<Tensor>& scanIn, int64_t length,
                             const std::vector<const Tensor*>& outer) {
  std::vector<size_t> inAxes(a.scanInputs);
  for (size_t j = 0; j < a.scanInputs; ++j) {
    if (scanIn[j].rank() == 0) ctx.fail("scan input " + std::to_string(j) + " is a scalar");
    inAxes[j] = normalizedAxis(ctx, a.inputAxes[j], scanIn[j].rank(), "scan input axis");
    if (scanIn[j].dim(inAxes[j]) < length) {
      ctx.fail("scan input " + std::to_string(j) + " " + scanIn[j].describe() +
               " is shorter than the scan length " + std::to_string(length) + " of scan input 0");
    }
  }
  std::vector<std::vector<Tensor>> parts(a.scanOutputs);
  std::vector<Tensor> bodyInputs(a.states + a.scanInputs);
  for (int64_t t = 0; t < length; ++t) {
    if (terminateRequested())
      throwTerminated("step " + std::to_string(t) + " of Scan '" + a.name + "'");
    for (size_t i = 0; i < a.states; ++i) bodyInputs[i] = std::move(state[i]);
    for (size_t j = 0; j < a.scanInputs; ++j)
      bodyInputs[a.states + j] =
          sliceAlong(scanIn[j], inAxes[j], a.inputReverse[j] ? length - 1 - t : t);
    std::vector<Tensor> outs = body.run(bodyInputs, outer);
    for (size_t i = 0; i < a.states; ++i) state[i] = std::move(outs[i]);
    for (size_t k = 0; k < a.scanOutputs; ++k) parts[k].push_back(std::move(outs[a.states + k]));
  }
  std::vector<Tensor> results = std::move(state);
  const ir::Graph& g = body.graph();
  for (size_t k = 0; k < a.scanOutputs; ++k) {
    if (a.outputReverse[k]) std::reverse(parts[k].begin(), parts[k].end());
    const Shape empty = declaredShape(g, a.states + k);
    const size_t rank = (parts[k].empty() ? empty.size() : parts[k][0].rank()) + 1;
    results.push_back(stackAlong(ctx, parts[k],
                                 normalizedAxis(ctx, a.outputAxes[k], rank, "scan output axis"),
                                 g.value(g.outputs[a.states + k]).type.dtype, empty));
  }
  return results;
}

std::vector<int64_t> intsOrZeros(const ir::Node& node, const char* name, size_t count) {
  std::vector<int64_t> v = ir::attrInts(node, name, std::vector<int64_t>(count, 0));
  if (v.size() != count) {
    ir::failNode(node, std::string("attribute ") + name + " has " + std::to_string(v.size()) +
                           " values; expected " + std::to_string(count));
  }
  return v;
}

KernelFn makeScan(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  auto body = makeBodyRunner(info, "body");
  const bool batched = node.opset < 9;
  const size_t first = batched ? 1 : 0;
  ScanAttrs a;
  a.name = node.name;
  a.explicitInputs = node.numExplicitInputs();
  a.scanInputs = static_cast<size_t>(ir::attrInt(node, "num_scan_inputs"));
  if (a.scanInputs + first > node.numExplicitInputs())
    ir::failNode(node, "num_scan_inputs is larger than its inputs");
  a.states = node.numExplicitInputs() - first - a.scanInputs;
  a.scanOutputs = node.outputs.size() - std::min(node.outputs.size(), a.states);
  if (batched) {
    a.inputAxes.assign(a.scanInputs, 0);
    a.outputAxes.assign(a.scanOutputs, 0);
    a.inputReverse = intsOrZeros(node, "directions", a.scanInputs);
    a.outputReverse.assign(a.scanOutputs, 0);
  } else {
    a.inputAxes = intsOrZeros(node, "scan_input_axes", a.scanInputs);
    a.inputReverse = intsOrZeros(node, "scan_input_directions", a.scanInputs);
    a.outputAxes = intsOrZeros(node, "scan_output_axes", a.scanOutputs);
    a.outputReverse = intsOrZeros(node, "scan_output_directions", a.scanOutputs);
  }
  return [body, a, first, batched](KernelContext& ctx) {
    const std::vector<const Tensor*> outer = implicitInputs(ctx, a.explicitInputs);
    auto input = [&](size_t i) -> const Tensor& { return ctx.input(first + i); };
    if (!batched) {
      std::vector<Tensor> state, scanIn;
      for (size_t i = 0; i < a.states; ++i) state.push_back(input(i));
      for (size_t j = 0; j < a.scanInputs; ++j) scanIn.push_back(input(a.states + j));
      if (scanIn[0].rank() == 0) ctx.fail("scan input 0 is a scalar");
      const int64_t length =
          scanIn[0].dim(normalizedAxis(ctx, a.inputAxes[0], scanIn[0].rank(), "scan input axis"));
      std::vector<Tensor> results =
          scanOnce(ctx, *body, a, std::move(state), scanIn, length, outer);
      for (size_t k = 0; k < results.size() && k < ctx.numOutputs(); ++k)
        ctx.setOutput(k, std::move(results[k]));
      return;
    }
    // Scan 8: every input has a batch axis 0 and the sequence on axis 1; each batch entry scans
    // its own sequence_lens[b] steps, and shorter scan outputs are zero-padded to the longest.
    if (input(0).rank() == 0 || input(a.states).rank() < 2)
      ctx.fail("inputs need a batch axis, scan inputs also a sequence axis");
    const int64_t batch = input(0).dim(0);
    const int64_t maxLength = input(a.states).dim(1);
    std::vector<int64_t> lengths(static_cast<size_t>(batch), maxLength);
    if (ctx.hasInput(0)) {
      lengths = ctx.input(0).toInt64Vector();
      if (static_cast<int64_t>(lengths.size()) != batch)
        ctx.fail("sequence_lens must have one value per batch entry");
      for (int64_t len : lengths)
        if (len < 0 || len > maxLength)
          ctx.fail("sequence_lens value " + std::to_string(len) + " is out of range");
    }
    std::vector<std::vector<Tensor>> perBatch(a.states + a.scanOutputs);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> state, scanIn;
      for (size_t i = 0; i < a.states + a.scanInputs; ++i) {
        if (input(i).rank() == 0 || input(i).dim(0) != batch)
          ctx.fail("input " + std::to_string(first + i) + " " + input(i).describe() +
                   " does not have the batch size " + std::to_string(batch));
        (i < a.states ? state : scanIn).push_back(sliceAlong(input(i), 0, b));
      }
      std::vector<Tensor> results =
          scanOnce(ctx, *body, a, std::move(state), scanIn, lengths[b], outer);
      for (size_t k = 0; k < results.size(); ++k) {
        if (k >= a.states && lengths[b] < maxLength) {  // pad the sequence axis 0 with zeros
          Shape padded = results[k].shape();
          padded[0] = maxLength;
          Tensor full(results[k].dtype(), padded);
          dispatchStorage(full.dtype(), "Scan", [&](auto tag) {
            using T = typename decltype(tag)::type;
            std::copy_n(results[k].template data<T>(), results[k].numel(), full.data<T>());
          });
          results[k] = std::move(full);
        }
        perBatch[k].push_back(std::move(results[k]));
      }
    }
    const ir::Graph& g = body->graph();
    for (size_t k = 0; k < perBatch.size() && k < ctx.numOutputs(); ++k) {
      ctx.setOutput(k, stackAlong(ctx, perBatch[k], 0, g.value(g.outputs[k]).type.dtype,
                                  declaredShape(g, k)));
    }
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL("If", KernelFactory(makeIf));
KILN_REGISTER_CPU_KERNEL("Loop", KernelFactory(makeLoop));
KILN_REGISTER_CPU_KERNEL("Scan", KernelFactory(makeScan));

}  // namespace kiln::cpu
