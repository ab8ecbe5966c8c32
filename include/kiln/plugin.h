// Plugins: custom operators that kiln imports from ONNX, builds into an engine, serializes into
// the plan and re-creates when the plan loads (the role of TensorRT's IPluginV2DynamicExt, its
// creator and registry, and of ONNX Runtime's custom ops). docs/plugins.md is the tutorial.
//
// Two ways to write one:
//   - the full path: derive from IPlugin (output shapes as expressions of input dims, output
//     types, supported types, workspace, configure, enqueue, serialize, clone) and IPluginCreator
//     (name, version, namespace, fields, create, deserialize), register with KILN_REGISTER_PLUGIN;
//   - the simple path: derive from SimplePlugin<T>, write enqueue (and optionally the output
//     shape), register with KILN_REGISTER_SIMPLE_PLUGIN(T, "name"). Its parameters come from the
//     node's fields, or from the JSON `info` attribute of an ONNX `Plugin` node.
//
// ONNX import: a node whose (domain, op_type) kiln does not implement is looked up in the registry
// as plugin (name = op_type, namespace = domain, version = the optional `plugin_version`
// attribute); its attributes become typed fields and constant inputs arrive as constant tensors.
// A node `Plugin` (default domain) with attributes `name` and `info` (a JSON object) and the
// optional `namespace` and `plugin_version` is the simple path's form of the same thing.
//
// Threads: an engine is shared by execution contexts on many threads. Each concurrent run of a
// plugin node gets its own clone() of the plugin (clones are made on demand and reused), so
// configure/enqueue never run concurrently on one instance and need no locking.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/export.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

// ---------------------------------------------------------------------------------------------
// Output dimensions as expressions of input dimensions

/// An integer expression over the dims of a plugin's inputs: constants, input dims, + - * /
/// (floor division), ceilDiv, max and min. Output shapes are given as such expressions so that
/// they hold for every shape of a dynamic input (kiln evaluates them at build time over symbolic
/// shapes and at run time over the actual shapes).
class KILN_API DimExpr {
 public:
  DimExpr() : DimExpr(int64_t{0}) {}
  DimExpr(int64_t value);  // NOLINT: a constant; implicit so that `in[0][1] * 2` reads naturally
  DimExpr(int value) : DimExpr(static_cast<int64_t>(value)) {}  // NOLINT
  /// Dim `axis` of input `input`.
  static DimExpr inputDim(int input, int axis);

  friend DimExpr operator+(const DimExpr& a, const DimExpr& b);
  friend DimExpr operator-(const DimExpr& a, const DimExpr& b);
  friend DimExpr operator*(const DimExpr& a, const DimExpr& b);
  /// Floor division; dividing by 0 is an error naming the plugin when evaluated.
  friend DimExpr operator/(const DimExpr& a, const DimExpr& b);
  friend DimExpr ceilDiv(const DimExpr& a, const DimExpr& b);
  friend DimExpr max(const DimExpr& a, const DimExpr& b);
  friend DimExpr min(const DimExpr& a, const DimExpr& b);

  enum class Kind { kCONSTANT, kINPUT_DIM, kADD, kSUB, kMUL, kFLOOR_DIV, kCEIL_DIV, kMAX, kMIN };
  Kind kind() const;
  /// kCONSTANT: the value; kINPUT_DIM: the input index.
  int64_t value() const;
  /// kINPUT_DIM: the axis.
  int axis() const;
  /// Operands of a binary expression.
  DimExpr lhs() const;
  DimExpr rhs() const;
  /// Evaluates with the given input shapes; nullopt if it reads a dim that is unknown (< 0) or
  /// out of range, or divides by zero.
  std::optional<int64_t> evaluate(const std::vector<Shape>& inputShapes) const;
  /// "in0[2] * 2 + 1"
  std::string toString() const;

 private:
  struct Node;
  explicit DimExpr(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  static DimExpr binary(Kind kind, const DimExpr& a, const DimExpr& b);
  std::shared_ptr<const Node> node_;
};

// The friends above, declared again at namespace scope to export them.
KILN_API DimExpr operator+(const DimExpr& a, const DimExpr& b);
KILN_API DimExpr operator-(const DimExpr& a, const DimExpr& b);
KILN_API DimExpr operator*(const DimExpr& a, const DimExpr& b);
KILN_API DimExpr operator/(const DimExpr& a, const DimExpr& b);
KILN_API DimExpr ceilDiv(const DimExpr& a, const DimExpr& b);
KILN_API DimExpr max(const DimExpr& a, const DimExpr& b);
KILN_API DimExpr min(const DimExpr& a, const DimExpr& b);

/// The dims of one input as expressions: shape[k] is DimExpr::inputDim(input, k).
using ShapeExpr = std::vector<DimExpr>;

// ---------------------------------------------------------------------------------------------
// Fields: a plugin's typed parameters (ONNX attributes, JSON `info` members, or set in C++)

enum class PluginFieldType { kINT, kFLOAT, kSTRING, kINTS, kFLOATS, kSTRINGS, kTENSOR };

/// "int", "float", "string", "ints", "floats", "strings", "tensor".
KILN_API const char* pluginFieldTypeName(PluginFieldType type);

using PluginFieldValue = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                                      std::vector<float>, std::vector<std::string>, Tensor>;

/// One field a creator accepts: its name, type and whether it must be given.
struct PluginFieldSpec {
  std::string name;
  PluginFieldType type = PluginFieldType::kINT;
  bool required = false;
};

/// Named, typed values. The typed getters throw kiln::Error (kInvalidArgument) naming the field,
/// the type asked for and the type held; an int is accepted where a float is asked for, and ints
/// where floats are.
class KILN_API PluginFields {
 public:
  PluginFields() = default;

  PluginFields& set(const std::string& name, PluginFieldValue value);
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  /// The type of a field that is present.
  PluginFieldType type(const std::string& name) const;
  const std::map<std::string, PluginFieldValue>& all() const { return values_; }
  size_t size() const { return values_.size(); }

  int64_t getInt(const std::string& name) const;
  int64_t getInt(const std::string& name, int64_t fallback) const;
  float getFloat(const std::string& name) const;
  float getFloat(const std::string& name, float fallback) const;
  std::string getString(const std::string& name) const;
  std::string getString(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> getInts(const std::string& name) const;
  std::vector<int64_t> getInts(const std::string& name, const std::vector<int64_t>& fallback) const;
  std::vector<float> getFloats(const std::string& name) const;
  std::vector<float> getFloats(const std::string& name, const std::vector<float>& fallback) const;
  std::vector<std::string> getStrings(const std::string& name) const;
  const Tensor& getTensor(const std::string& name) const;

  /// A portable byte encoding of every field (tensors included), for IPlugin::serialize.
  std::vector<uint8_t> serialize() const;
  /// The inverse of serialize; throws kiln::Error (kInvalidPlan) on malformed bytes.
  static PluginFields deserialize(const void* data, size_t size);
  /// Fields from a JSON object: numbers become int or float, strings string, arrays of numbers
  /// ints or floats (floats if any member is not an integer), arrays of strings strings.
  /// Throws kiln::Error (kInvalidArgument) naming the member on anything else.
  static PluginFields fromJson(const std::string& json);

 private:
  const PluginFieldValue& get(const std::string& name) const;
  std::map<std::string, PluginFieldValue> values_;
};

// ---------------------------------------------------------------------------------------------
// The plugin

/// Memory layouts of plugin inputs and outputs. kiln's tensors are dense row-major (NCHW).
enum class TensorFormat { kLINEAR };

struct PluginTensorFormat {
  DataType type = DataType::kFloat32;
  TensorFormat format = TensorFormat::kLINEAR;
};

/// A plugin input or output with its resolved shape. `constant` is the value of an input that is
/// a constant weight (an initializer), nullptr otherwise.
struct PluginTensorDesc {
  DataType type = DataType::kUndefined;
  Shape dims;
  const Tensor* constant = nullptr;
  bool present = true;  // false for an omitted optional input (an empty name in ONNX)
};

class KILN_API IPlugin {
 public:
  virtual ~IPlugin() = default;

  /// Identity of the creator that re-creates this plugin from its serialized bytes.
  virtual std::string getPluginName() const = 0;
  virtual std::string getPluginVersion() const { return "1"; }
  virtual std::string getPluginNamespace() const { return ""; }

  virtual int getNbOutputs() const { return 1; }
  /// The dims of output `outputIndex`; inputs[i][k] is the expression for dim k of input i
  /// (inputs[i] is empty for an omitted optional input). Default: the dims of input 0.
  virtual std::vector<DimExpr> getOutputDimensions(int outputIndex,
                                                   const std::vector<ShapeExpr>& inputs) const;
  /// Default: the type of input 0.
  virtual DataType getOutputDataType(int outputIndex,
                                     const std::vector<DataType>& inputTypes) const;
  /// Whether position `pos` (inputs first, then outputs) accepts inOut[pos], given the formats of
  /// the positions before it. Checked when the engine is built and when a plan loads.
  /// Default: float32, linear, everywhere.
  virtual bool supportsFormatCombination(int pos, const std::vector<PluginTensorFormat>& inOut,
                                         int nbInputs) const;
  /// Bytes of scratch memory enqueue needs for these shapes (64-byte aligned). Default 0.
  virtual size_t getWorkspaceSize(const std::vector<PluginTensorDesc>& inputs,
                                  const std::vector<PluginTensorDesc>& outputs) const {
    return 0;
  }
  /// Called before the first enqueue and whenever the input shapes change, with the resolved
  /// shapes. A failed Status fails the run, naming the node and the plugin.
  virtual Status configure(const std::vector<PluginTensorDesc>& inputs,
                           const std::vector<PluginTensorDesc>& outputs) {
    return Status();
  }
  /// Computes the outputs. inputs[i] is nullptr for an omitted optional input; outputs are
  /// allocated with the shapes of getOutputDimensions. A failed Status (or a thrown exception)
  /// fails the run with an error that names the node and the plugin.
  virtual Status enqueue(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, void* workspace) = 0;

  /// Bytes from which the creator's deserializePlugin re-creates this plugin (stored in the plan).
  virtual std::vector<uint8_t> serialize() const = 0;
  virtual std::unique_ptr<IPlugin> clone() const = 0;
};

class KILN_API IPluginCreator {
 public:
  virtual ~IPluginCreator() = default;
  virtual std::string getPluginName() const = 0;
  virtual std::string getPluginVersion() const { return "1"; }
  virtual std::string getPluginNamespace() const { return ""; }
  /// The fields the plugin accepts. When not empty, kiln checks given fields against it before
  /// createPlugin: a required field missing, a field of another type, or a field not listed is
  /// an error naming the node, the field, the expected and the given type.
  virtual std::vector<PluginFieldSpec> getFieldNames() const { return {}; }
  /// `name` is the node's name (for messages). Throw kiln::Error to refuse the fields.
  virtual std::unique_ptr<IPlugin> createPlugin(const std::string& name,
                                                const PluginFields& fields) const = 0;
  virtual std::unique_ptr<IPlugin> deserializePlugin(const std::string& name, const void* data,
                                                     size_t size) const = 0;
};

// ---------------------------------------------------------------------------------------------
// Registry

/// The process-wide plugin registry. Thread-safe.
class KILN_API PluginRegistry {
 public:
  static PluginRegistry& global();

  /// Fails (kINVALID_ARGUMENT) when a creator with the same name, version and namespace exists.
  Status registerCreator(std::shared_ptr<IPluginCreator> creator);
  /// Removes a creator; false if it was not registered.
  bool deregisterCreator(const std::string& name, const std::string& version,
                         const std::string& pluginNamespace);
  /// The creator of (name, version, namespace); an empty version matches the highest registered
  /// version. nullptr when there is none.
  std::shared_ptr<IPluginCreator> getCreator(const std::string& name,
                                             const std::string& version = "",
                                             const std::string& pluginNamespace = "") const;
  /// True when some version of (name, namespace) is registered.
  bool hasPlugin(const std::string& name, const std::string& pluginNamespace) const;
  std::vector<std::shared_ptr<IPluginCreator>> getAllCreators() const;
  /// The plugin libraries loaded so far (loadPluginLibrary), in order.
  std::vector<std::string> getLoadedLibraries() const;

  /// Used by loadPluginLibrary.
  void addLoadedLibrary(const std::string& path);

 private:
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<IPluginCreator>> creators_;
  std::vector<std::string> libraries_;
};

/// dlopen()s a shared library whose static KILN_REGISTER_PLUGIN registrations add its plugins to
/// the registry. Fails (kIO_ERROR) naming the path and dlerror()'s message; loading the same path
/// twice is a no-op.
KILN_API Status loadPluginLibrary(const std::string& path);

/// Writes a failed static registration to stderr (the registry keeps the first creator).
KILN_API void reportPluginRegistrationFailure(const Status& status);

template <typename Creator>
struct PluginRegistrar {
  PluginRegistrar() {
    Status s = PluginRegistry::global().registerCreator(std::make_shared<Creator>());
    if (!s.ok()) reportPluginRegistrationFailure(s);
  }
};

#define KILN_PLUGIN_CONCAT_INNER(a, b) a##b
#define KILN_PLUGIN_CONCAT(a, b) KILN_PLUGIN_CONCAT_INNER(a, b)
/// Registers a creator class (default-constructible) when the library is loaded.
#define KILN_REGISTER_PLUGIN(Creator) \
  static ::kiln::PluginRegistrar<Creator> KILN_PLUGIN_CONCAT(kilnPluginRegistrar_, __COUNTER__)

// ---------------------------------------------------------------------------------------------
// The simple path

/// A plugin that only needs enqueue: one output with the type and dims of input 0 unless
/// outputDims is overridden; float32 everywhere; its fields (from ONNX attributes or the JSON
/// `info`) are its state, serialized as such. Derived must be default-constructible and copyable.
///
///   struct Scale : kiln::SimplePlugin<Scale> {
///     kiln::Status run(const std::vector<const kiln::Tensor*>& in, kiln::Tensor& out) override {
///     ... }
///   };
///   KILN_REGISTER_SIMPLE_PLUGIN(Scale, "Scale");
template <typename Derived>
class SimplePlugin : public IPlugin {
 public:
  /// The computation: inputs (nullptr where omitted) to the one output.
  virtual Status run(const std::vector<const Tensor*>& inputs, Tensor& output) = 0;
  /// The output dims; default: those of input 0.
  virtual std::vector<DimExpr> outputDims(const std::vector<ShapeExpr>& inputs) const {
    return inputs.at(0);
  }

  const PluginFields& fields() const { return fields_; }
  const std::string& nodeName() const { return nodeName_; }

  // IPlugin, with the defaults described above.
  std::string getPluginName() const override { return identity_.name; }
  std::string getPluginVersion() const override { return identity_.version; }
  std::string getPluginNamespace() const override { return identity_.nspace; }
  std::vector<DimExpr> getOutputDimensions(int,
                                           const std::vector<ShapeExpr>& inputs) const override {
    return outputDims(inputs);
  }
  Status enqueue(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                 void*) override {
    return run(inputs, *outputs.at(0));
  }
  std::vector<uint8_t> serialize() const override { return fields_.serialize(); }
  std::unique_ptr<IPlugin> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }

  struct Identity {
    std::string name, version = "1", nspace;
  };
  /// Used by SimplePluginCreator.
  void initSimplePlugin(Identity identity, std::string nodeName, PluginFields fields) {
    identity_ = std::move(identity);
    nodeName_ = std::move(nodeName);
    fields_ = std::move(fields);
  }

 private:
  Identity identity_;
  std::string nodeName_;
  PluginFields fields_;
};

/// The creator of a SimplePlugin: accepts any fields and keeps them as the plugin's state.
template <typename Plugin>
class SimplePluginCreator : public IPluginCreator {
 public:
  SimplePluginCreator(std::string name, std::string version = "1", std::string pluginNamespace = "")
      : identity_{std::move(name), std::move(version), std::move(pluginNamespace)} {}
  std::string getPluginName() const override { return identity_.name; }
  std::string getPluginVersion() const override { return identity_.version; }
  std::string getPluginNamespace() const override { return identity_.nspace; }
  std::unique_ptr<IPlugin> createPlugin(const std::string& name,
                                        const PluginFields& fields) const override {
    auto plugin = std::make_unique<Plugin>();
    plugin->initSimplePlugin(identity_, name, fields);
    return plugin;
  }
  std::unique_ptr<IPlugin> deserializePlugin(const std::string& name, const void* data,
                                             size_t size) const override {
    return createPlugin(name, PluginFields::deserialize(data, size));
  }

 private:
  typename SimplePlugin<Plugin>::Identity identity_;
};

template <typename Plugin>
struct SimplePluginRegistrar {
  SimplePluginRegistrar(const char* name, const char* version = "1",
                        const char* pluginNamespace = "") {
    Status s = PluginRegistry::global().registerCreator(
        std::make_shared<SimplePluginCreator<Plugin>>(name, version, pluginNamespace));
    if (!s.ok()) reportPluginRegistrationFailure(s);
  }
};

/// Registers a SimplePlugin under a name (and optionally a version and a namespace).
#define KILN_REGISTER_SIMPLE_PLUGIN(Plugin, ...)                                              \
  static ::kiln::SimplePluginRegistrar<Plugin> KILN_PLUGIN_CONCAT(kilnSimplePluginRegistrar_, \
                                                                  __COUNTER__)(__VA_ARGS__)

// ---------------------------------------------------------------------------------------------
// Threads

/// Splits [0, count) into contiguous ranges and calls fn(begin, end) once per range, on the
/// intra-op threads of the execution context that runs the plugin (called from enqueue), or as
/// one call fn(0, count) on the caller when there are none. Returns once every range is done;
/// fn must be safe to run on several threads at once and must not throw (report errors through
/// state that enqueue checks afterwards).
KILN_API void parallelFor(int64_t count, const std::function<void(int64_t begin, int64_t end)>& fn);

}  // namespace kiln
