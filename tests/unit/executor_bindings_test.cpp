// The executor's per-run overhead: a run at unchanged shapes reuses the node bindings made with
// the memory plan (no heap allocation of its own), and Concats whose inputs the planner put inside
// the output's slot (zero-copy Concat) give the same results as the kernel's copy.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>

#include "backends/cpu/kernel.h"
#include "engine/executor.h"
#include "engine/memory_plan.h"
#include "graph_loading.h"
#include "model_builder.h"
#include "onnx/loader.h"

// Counts every operator new while counting is on (all threads: kernels' pool workers too).
namespace {
std::atomic<bool> gCounting{false};
std::atomic<long> gAllocations{0};

void* countedAlloc(std::size_t size, std::size_t alignment) {
  if (gCounting.load(std::memory_order_relaxed))
    gAllocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = alignment > alignof(std::max_align_t)
                ? std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment)
                : std::malloc(size);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t size) { return countedAlloc(size, 0); }
void* operator new[](std::size_t size) { return countedAlloc(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) {
  return countedAlloc(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return countedAlloc(size, static_cast<std::size_t>(a));
}
// The nothrow forms too: a replacement must cover every form, or memory from a form left out
// (libstdc++'s std::stable_sort buffer comes from nothrow new) reaches the replaced delete from
// another allocator; ASan reports that as an alloc-dealloc mismatch.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return countedAlloc(size, 0);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return countedAlloc(size, static_cast<std::size_t>(a));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t& tag) noexcept {
  return operator new(size, a, tag);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace kiln {
namespace {

using namespace kiln::testing;

std::shared_ptr<const ir::Graph> loadGraph(const onnx::ModelProto& m, const std::string& name) {
  return std::make_shared<ir::Graph>(loadInferredGraph(m, name));
}

int id(const ir::Graph& g, const std::string& name) { return g.findValue(name); }

onnx::ModelProto concatModel(int64_t batch);

// kiln.test::Double, y = 2x: a kernel that allocates nothing, so that a test can count the
// executor's own allocations (the real elementwise kernels allocate a little per call).
void inferSameType(ir::InferContext& ctx) { ctx.setOutputTypeInfo(0, ctx.inputTypeInfo(0)); }
KILN_REGISTER_OP_SCHEMA({"kiln.test", "Double", 1, 1000, inferSameType});
void doubleKernel(cpu::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = 2.0f * x.data<float>()[i];
}
KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln.test", "Double", doubleKernel);

// concatModel with every node but the first Concat and the Reshapes replaced by Double, and z
// computed from y: z = 2 * 2 * reshape(2 * concat(2x, 2x)) = 16 x (repeated twice).
std::shared_ptr<const ir::Graph> doublingGraph(const std::string& name) {
  auto g = std::const_pointer_cast<ir::Graph>(loadGraph(concatModel(1), name));
  for (ir::Node& node : g->nodes) {
    if (node.opType == "Reshape" || node.outputs[0] == id(*g, "c")) continue;
    node.domain = "kiln.test";
    node.opType = "Double";
    node.opset = 1;
    node.inputs.resize(1);
    node.attrs.clear();
    if (node.outputs[0] == id(*g, "z")) node.inputs = {id(*g, "y")};
  }
  return g;
}

Tensor ramp(Shape shape, float scale, float shift) {
  Tensor t(DataType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = scale * static_cast<float>(i % 97) + shift;
  return t;
}

void expectSame(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << "element " << i;
}

// x[1,16,4,4]: a = Relu(x), b = Sigmoid(x), c = Concat(a, b) on channels, d = Tanh(c),
// r = Reshape(d, [1, 512]), y = Neg(r); a is read again after the Concat (e = a + 1,
// ef = Reshape(e, [1, 256]), z = Concat(ef, ef) * y): the Concat's slot must stay alive for it.
onnx::ModelProto concatModel(int64_t batch) {
  auto m = makeModel();
  addInput(m, "x", {batch, 16, 4, 4});
  addInt64Initializer(m, "flat", {0, -1});
  addFloatInitializer(m, "one", {1}, {1.0f});
  addNode(m, "Relu", {"x"}, {"a"});
  addNode(m, "Sigmoid", {"x"}, {"b"});
  addNode(m, "Concat", {"a", "b"}, {"c"});
  setInt(lastNode(m), "axis", 1);
  addNode(m, "Tanh", {"c"}, {"d"});
  addNode(m, "Reshape", {"d", "flat"}, {"r"});
  addNode(m, "Neg", {"r"}, {"y"});
  addNode(m, "Add", {"a", "one"}, {"e"});
  addNode(m, "Reshape", {"e", "flat"}, {"ef"});
  addNode(m, "Concat", {"ef", "ef"}, {"ee"});
  setInt(lastNode(m), "axis", 1);
  addNode(m, "Mul", {"ee", "y"}, {"z"});
  addOutput(m, "z", {batch, 512});
  return m;
}

TEST(ZeroCopyConcat, InputsArePlacedInsideTheConcatOutput) {
  auto g = loadGraph(concatModel(1), "zc_plan");
  MemoryPlan plan = planMemoryForInputShapes(*g, {{id(*g, "x"), {1, 16, 4, 4}}});
  const int a = id(*g, "a"), b = id(*g, "b"), c = id(*g, "c");
  ASSERT_EQ(plan.inPlaceConcats, 1);  // the second reads one tensor twice: copied
  EXPECT_EQ(plan.inPlaceConcatBytes, 2048u);
  ASSERT_TRUE(plan.placed(c));
  EXPECT_EQ(plan.offsets[a], plan.offsets[c]);
  EXPECT_EQ(plan.offsets[b], plan.offsets[c] + 1024);
  // c now lives from a's producer to a's last reader (Add, step 6): d and e must not overlap it.
  const uint64_t c0 = static_cast<uint64_t>(plan.offsets[c]);
  for (const char* other : {"d", "e"}) {
    const int o = id(*g, other);
    ASSERT_TRUE(plan.placed(o)) << other;
    const uint64_t o0 = static_cast<uint64_t>(plan.offsets[o]);
    EXPECT_TRUE(o0 + plan.bytes[o] <= c0 || c0 + plan.bytes[c] <= o0)
        << other << " overlaps the Concat output";
  }
  // a and b take no room of their own, but c now lives as long as a: c, d (y is computed in its
  // slot) and e are alive at step 6.
  EXPECT_EQ(plan.arenaBytes, 2u * 2048 + 1024);
}

TEST(ZeroCopyConcat, OnlyWhereEachInputIsOneSlabOfTheOutput) {
  // Batch 2: the channel axis is not the outermost non-unit one, each input is two pieces.
  auto g2 = loadGraph(concatModel(2), "zc_batch2");
  EXPECT_EQ(planMemoryForInputShapes(*g2, {{id(*g2, "x"), {2, 16, 4, 4}}}).inPlaceConcats, 0);
  // A graph input, a slab that would start off the arena's 64-byte alignment (3 floats), a
  // graph output, and (in concatModel) one tensor read twice.
  auto m = makeModel();
  addInput(m, "x", {1, 3});
  addNode(m, "Relu", {"x"}, {"a"});
  addNode(m, "Concat", {"x", "a"}, {"c1"});
  setInt(lastNode(m), "axis", 1);
  addNode(m, "Sigmoid", {"x"}, {"b"});
  addNode(m, "Concat", {"a", "b"}, {"c2"});
  setInt(lastNode(m), "axis", 1);
  addNode(m, "Concat", {"c1", "c2"}, {"y"});
  setInt(lastNode(m), "axis", 1);
  addOutput(m, "y", {1, 12});
  auto g = loadGraph(m, "zc_refused");
  EXPECT_EQ(planMemoryForInputShapes(*g, {{id(*g, "x"), {1, 3}}}).inPlaceConcats, 0);
}

TEST(ZeroCopyConcat, RunsLikeTheKernelsCopy) {
  auto g = loadGraph(concatModel(1), "zc_run");
  Executor executor(g);
  ExecutorMemory memory;
  const int x = id(*g, "x");
  for (float scale : {0.05f, -0.03f, 0.11f}) {
    Tensor input = ramp({1, 16, 4, 4}, scale, -1.0f);
    Tensor want = executor.run({{x, input}})[0];  // unplanned: the Concat kernel copies
    Tensor got = executor.run({{x, input}}, &memory)[0];
    EXPECT_EQ(memory.plan().inPlaceConcats, 1);
    expectSame(got, want);
    // Against the formula: z = concat(ef, ef) * -tanh(concat(relu(x), sigmoid(x))).
    for (int64_t i = 0; i < 512; ++i) {
      const float xi = input.data<float>()[i % 256];
      const float ci = i < 256 ? std::max(xi, 0.0f) : 1.0f / (1.0f + std::exp(-xi));
      const float ef = std::max(xi, 0.0f) + 1.0f;
      ASSERT_NEAR(got.data<float>()[i], ef * -std::tanh(ci), 1e-5f) << "element " << i;
    }
  }
  EXPECT_EQ(memory.planCount(), 1);
}

// After the first run at some shapes, a run with the same shapes whose output goes to the
// caller's buffer allocates nothing (with kernels that allocate nothing themselves).
TEST(ExecutorBindings, ARunAtUnchangedShapesAllocatesNothing) {
  auto g = doublingGraph("bind_alloc");
  Executor executor(g);
  ExecutorMemory memory;
  const int x = id(*g, "x"), z = id(*g, "z");
  std::vector<float> buffer(512);
  const std::vector<OutputBuffer> buffers = {{z, buffer.data(), buffer.size() * sizeof(float)}};
  std::vector<std::pair<int, Tensor>> inputs = {{x, ramp({1, 16, 4, 4}, 0.05f, -1.0f)}};
  std::vector<Tensor> results;
  executor.run(inputs, memory, buffers, nullptr, results);  // plans and binds
  EXPECT_EQ(memory.plan().inPlaceConcats, 1);
  const Tensor want = executor.run(inputs)[0];
  for (int64_t i = 0; i < 512; ++i)
    ASSERT_EQ(want.data<float>()[i], 16.0f * inputs[0].second.data<float>()[i % 256]);
  for (int i = 0; i < 3; ++i) {
    std::fill(buffer.begin(), buffer.end(), 0.0f);
    gAllocations = 0;
    gCounting = true;
    executor.run(inputs, memory, buffers, nullptr, results);
    gCounting = false;
    EXPECT_EQ(gAllocations.load(), 0) << "run " << i;
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].raw(), buffer.data());
    expectSame(results[0], want);
  }
  std::vector<Tensor> results2;
  // New shapes: planned and bound again, still right.
  auto g2 = loadGraph(concatModel(-1), "bind_alloc_dynamic");
  Executor dynamic(g2);
  ExecutorMemory memory2;
  for (int64_t batch : {1, 2, 2, 1}) {
    std::vector<std::pair<int, Tensor>> in = {
        {id(*g2, "x"), ramp({batch, 16, 4, 4}, 0.07f, -2.0f)}};
    dynamic.run(in, memory2, {}, nullptr, results);
    expectSame(results[0], dynamic.run(in)[0]);
  }
  EXPECT_EQ(memory2.planCount(), 3);
}

}  // namespace
}  // namespace kiln
