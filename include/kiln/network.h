// Network definition: build a network layer by layer from C++, with no ONNX file, as with
// TensorRT's INetworkDefinition. Layers become nodes with ONNX operator semantics (opset 17);
// the OnnxParser fills a network from a model file the same way.
//
//   auto network = builder->createNetwork();
//   ITensor* x = network->addInput("x", DataType::kFloat32, {-1, 3, 224, 224});
//   ILayer* pool = network->addPooling(*x, PoolingType::kMAX, {2, 2}, {.strides = {2, 2}});
//   network->markOutput(*pool->getOutput(0));
//
// add* methods return nullptr when the layer is invalid (the logger says why).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/export.h"
#include "kiln/logger.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

/// Host values for a layer's weights; copied when the layer is added.
struct Weights {
  DataType type = DataType::kFloat32;
  const void* values = nullptr;
  int64_t count = 0;  // 0: no weights (e.g. no bias)
};

enum class ActivationType {
  kRELU,
  kSIGMOID,
  kTANH,
  kLEAKY_RELU,  // alpha: slope for x < 0
  kELU,         // alpha
  kSELU,        // alpha, beta = gamma
  kSOFTSIGN,
  kSOFTPLUS,
  kCLIP,              // alpha = min, beta = max
  kHARD_SIGMOID,      // alpha, beta
  kTHRESHOLDED_RELU,  // alpha
};
enum class PoolingType { kMAX, kAVERAGE };
enum class ElementWiseOperation { kSUM, kPROD, kMAX, kMIN, kSUB, kDIV, kPOW };
enum class MatrixOperation { kNONE, kTRANSPOSE };  // kTRANSPOSE swaps the last two dims
enum class ResizeMode { kNEAREST, kLINEAR, kCUBIC };

struct ConvolutionParams {
  Shape strides;    // default 1 per spatial dim
  Shape padding;    // symmetric padding per spatial dim, default 0
  Shape dilations;  // default 1
  int64_t groups = 1;
};

struct PoolingParams {
  Shape strides;  // default 1 per spatial dim (ONNX's default; TensorRT tutorials set it)
  Shape padding;  // symmetric, default 0
  bool averageCountExcludesPadding = true;
};

/// addShuffle: an optional transpose, an optional reshape, an optional second transpose.
struct ShuffleParams {
  std::vector<int64_t> firstTranspose;  // permutation; empty: none
  Shape reshapeDims;                    // ONNX Reshape semantics: 0 copies the dim, -1 is inferred
  bool hasReshape = false;
  std::vector<int64_t> secondTranspose;  // permutation; empty: none
};

struct ResizeParams {
  ResizeMode mode = ResizeMode::kNEAREST;
  std::vector<float> scales;                            // one per dim, or
  Shape outputDims;                                     // the output shape
  std::string coordinateTransformation = "half_pixel";  // ONNX coordinate_transformation_mode
  std::string nearestMode = "round_prefer_floor";
};

class NetworkDefinition;
class IPlugin;
class PluginFields;

/// A tensor of a network: an interface, made and owned by the network (its methods hand out
/// pointers to them; an ITensor of another network, or of the caller's own making, is refused).
class KILN_API ITensor {
 public:
  virtual const std::string& getName() const = 0;
  /// Renames the tensor; fails if the name is taken.
  virtual Status setName(const std::string& name) = 0;
  /// Dims as shape inference knows them (-1 where dynamic or unknown); empty with hasShape() false
  /// when the rank is unknown.
  virtual Shape getDimensions() const = 0;
  virtual bool hasShape() const = 0;
  virtual DataType getType() const = 0;
  virtual bool isNetworkInput() const = 0;
  virtual bool isNetworkOutput() const = 0;

  ITensor(const ITensor&) = delete;
  ITensor& operator=(const ITensor&) = delete;

 protected:
  ITensor() = default;
  virtual ~ITensor() = default;
};

/// A layer of a network: one or a few ONNX nodes (addShuffle may add Transpose + Reshape). An
/// interface, made and owned by the network.
class KILN_API ILayer {
 public:
  virtual const std::string& getName() const = 0;
  virtual void setName(const std::string& name) = 0;
  /// The ONNX operator it runs ("Conv", "MaxPool", ...; "Constant" for addConstant).
  virtual const std::string& getType() const = 0;
  virtual int getNbInputs() const = 0;
  virtual ITensor* getInput(int index) const = 0;
  /// Replaces input `index`; fails (and keeps the old input) if the layer would be invalid.
  virtual Status setInput(int index, ITensor& tensor) = 0;
  virtual int getNbOutputs() const = 0;
  virtual ITensor* getOutput(int index) const = 0;
  /// Precision the layer should compute in: a constraint the builder obeys under
  /// BuilderFlag::kOBEY_PRECISION_CONSTRAINTS (an error when it cannot) or follows where it can
  /// under kPREFER_PRECISION_CONSTRAINTS, and ignores (with a warning) without either. kFloat32
  /// keeps the layer out of kBF16's autocast; kBFloat16 needs kBF16, kFloat16 kFP16 (FP16 kernels
  /// are not implemented yet: it runs FP32, with a warning). docs/precision.md.
  virtual void setPrecision(DataType type) = 0;
  virtual DataType getPrecision() const = 0;  // kFloat32 when not set
  virtual bool precisionIsSet() const = 0;
  virtual void resetPrecision() = 0;
  /// Output type; the builder adds a Cast where it differs from the computed type.
  virtual void setOutputType(int index, DataType type) = 0;
  virtual DataType getOutputType(int index) const = 0;

  ILayer(const ILayer&) = delete;
  ILayer& operator=(const ILayer&) = delete;

 protected:
  ILayer() = default;
  virtual ~ILayer() = default;
};

class KILN_API NetworkDefinition {
 public:
  explicit NetworkDefinition(ILogger& logger);
  ~NetworkDefinition();
  NetworkDefinition(const NetworkDefinition&) = delete;
  NetworkDefinition& operator=(const NetworkDefinition&) = delete;

  /// dims: -1 for dynamic dims.
  ITensor* addInput(const std::string& name, DataType type, const Shape& dims);
  Status markOutput(ITensor& tensor);

  /// Conv: kernel has nbOutputMaps * (C / groups) * prod(kernelSize) values (OIHW), bias
  /// nbOutputMaps values or none.
  ILayer* addConvolution(ITensor& input, int64_t nbOutputMaps, const Shape& kernelSize,
                         const Weights& kernel, const Weights& bias,
                         const ConvolutionParams& params = {});
  ILayer* addPooling(ITensor& input, PoolingType type, const Shape& windowSize,
                     const PoolingParams& params = {});
  ILayer* addActivation(ITensor& input, ActivationType type, float alpha = 0.0f, float beta = 0.0f);
  /// numpy broadcasting between a and b.
  ILayer* addElementWise(ITensor& a, ITensor& b, ElementWiseOperation op);
  ILayer* addMatrixMultiply(ITensor& a, MatrixOperation opA, ITensor& b, MatrixOperation opB);
  /// y = x W^T + b with W of shape [nbOutputs, K]; inputs of rank > 2 are flattened to [N, K]
  /// first.
  ILayer* addFullyConnected(ITensor& input, int64_t nbOutputs, const Weights& kernel,
                            const Weights& bias);
  ILayer* addSoftMax(ITensor& input, int64_t axis = -1);
  ILayer* addShuffle(ITensor& input, const ShuffleParams& params);
  ILayer* addConcatenation(const std::vector<ITensor*>& inputs, int64_t axis);
  ILayer* addConstant(const Shape& dims, const Weights& weights);
  ILayer* addResize(ITensor& input, const ResizeParams& params);
  /// A plugin layer (include/kiln/plugin.h): a clone of `plugin`, whose creator must be
  /// registered (a plan re-creates the plugin through the registry). Outputs: getNbOutputs().
  ILayer* addPlugin(const std::vector<ITensor*>& inputs, const IPlugin& plugin);
  /// A plugin layer made by the registered creator of (name, version, namespace) from `fields`
  /// (checked against the creator's field list); an empty version picks the highest one.
  ILayer* addPlugin(const std::vector<ITensor*>& inputs, const std::string& name,
                    const PluginFields& fields, const std::string& version = "",
                    const std::string& pluginNamespace = "");

  int getNbInputs() const;
  ITensor* getInput(int index) const;
  int getNbOutputs() const;
  ITensor* getOutput(int index) const;
  int getNbLayers() const;
  ILayer* getLayer(int index) const;
  ILogger& logger() const;

  /// kiln's internal representation (an ir::Graph and its layers); opaque outside the library.
  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
