// The network definition API (INetworkDefinition, ITensor, ILayer) with TensorRT's Python names,
// numpy weights, and the layer properties TensorRT lets a script set after creation
// (conv.stride_nd, shuffle.reshape_dims, ...), which call setLayerParams (kiln/layer_params.h).
#include <Python.h>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln/error.h"
#include "kiln/layer_params.h"
#include "kiln/plugin.h"
#include "tensors.h"
#include "trt_common.h"
#include "trt_plugin_handle.h"

namespace kiln::python {

namespace {

[[noreturn]] void refused(PyNetwork& net, const std::string& what) {
  std::string why = net.logger->takeLastError();
  throw Error(ErrorCode::kInvalidArgument, why.empty() ? what + " was refused" : why);
}

// A layer as Python holds it: the C++ handle and the network it belongs to (kept alive).
struct PyLayer {
  nb::object owner;  // the kiln.INetworkDefinition
  PyNetwork* net;
  ILayer* layer;

  LayerParams params() const { return getLayerParams(*net->network, *layer); }
  std::string label() const { return layer->getType() + " layer '" + layer->getName() + "'"; }
};

PyLayer pyLayer(nb::handle network, ILayer* layer) {
  return PyLayer{nb::borrow(network), &nb::cast<PyNetwork&>(network), layer};
}

PyLayer checked(nb::handle network, ILayer* layer, const std::string& what) {
  if (!layer) refused(nb::cast<PyNetwork&>(network), what);
  return pyLayer(network, layer);
}

// Weights from a numpy array, a kiln.Weights, anything numpy converts, or None (no weights).
// The network copies the values when the layer is added, so the array need not outlive it.
struct HostWeights {
  Tensor values;
  Weights weights() const {
    if (!values.defined() || values.numel() == 0) return Weights{};
    return Weights{values.dtype(), values.raw(), values.numel()};
  }
};

HostWeights weightsOf(nb::handle value, const char* what) {
  if (value.is_none()) return {};
  nb::object array = nb::borrow(value);
  if (nb::hasattr(value, "numpy") && nb::hasattr(value, "nbytes"))
    array = value.attr("numpy")();  // kiln.Weights
  if (array.is_none()) return {};
  array = nb::module_::import_("numpy").attr("ascontiguousarray")(array);
  TensorInfo info;
  info.name = what;
  return {tensorFromPython(array, info)};
}

template <typename P>
P paramsOf(const PyLayer& layer, const char* property) {
  LayerParams params = layer.params();
  if (const P* p = std::get_if<P>(&params)) return *p;
  throw nb::attribute_error((layer.label() + " has no property '" + property + "'").c_str());
}

template <typename P, typename Change>
void updateParams(PyLayer& layer, const char* property, Change&& change) {
  P params = paramsOf<P>(layer, property);
  change(params);
  check(setLayerParams(*layer.net->network, *layer.layer, params));
}

// A property of the layers whose params are P: reads with get(params), writes with set(params,
// value).
template <typename P, typename Get, typename Set>
void paramsProperty(nb::class_<PyLayer>& cls, const char* name, Get get, Set set, const char* doc) {
  cls.def_prop_rw(
      name, [name, get](const PyLayer& layer) { return get(paramsOf<P>(layer, name)); },
      [name, set](PyLayer& layer, nb::handle value) {
        updateParams<P>(layer, name, [&](P& p) { set(p, value); });
      },
      nb::arg("value").none(), doc);
}

// A dims property that convolution and pooling layers both have (strides, padding).
void spatialProperty(nb::class_<PyLayer>& cls, const char* name, Shape ConvolutionParams::*conv,
                     Shape PoolingParams::*pool, const char* doc) {
  cls.def_prop_rw(
      name,
      [=](const PyLayer& l) {
        LayerParams p = l.params();
        if (auto* c = std::get_if<ConvolutionParams>(&p)) return dimsTuple((*c).*conv);
        return dimsTuple(paramsOf<PoolingParams>(l, name).*pool);
      },
      [=](PyLayer& l, nb::handle v) {
        Shape dims = dimsOf(v, name);
        if (std::holds_alternative<ConvolutionParams>(l.params())) {
          updateParams<ConvolutionParams>(l, name, [&](ConvolutionParams& p) { p.*conv = dims; });
        } else {
          updateParams<PoolingParams>(l, name, [&](PoolingParams& p) { p.*pool = dims; });
        }
      },
      doc);
}

// TensorRT's default concatenation axis: rank - 3, or 0 below rank 3.
int64_t defaultConcatAxis(const std::vector<ITensor*>& inputs) {
  if (inputs.empty() || !inputs[0]) return 0;
  const int64_t rank = static_cast<int64_t>(inputs[0]->getDimensions().size());
  return rank >= 3 ? rank - 3 : 0;
}

NetworkDefinition& net(nb::handle network) { return *nb::cast<PyNetwork&>(network).network; }

std::vector<ITensor*> tensorList(nb::handle inputs) {
  std::vector<ITensor*> tensors;
  for (nb::handle t : inputs) tensors.push_back(t.is_none() ? nullptr : nb::cast<ITensor*>(t));
  return tensors;
}

void bindEnums(nb::module_& m) {
  nb::enum_<DataType>(m, "DataType", nb::is_arithmetic(),
                      "Element types (TensorRT's names; values are ONNX's).")
      .value("FLOAT", DataType::kFloat32, "32-bit float (kiln.float32)")
      .value("HALF", DataType::kFloat16, "16-bit float (kiln.float16)")
      .value("BF16", DataType::kBFloat16,
             "bfloat16 (kiln.bfloat16; numpy arrays through ml_dtypes)")
      .value("DOUBLE", DataType::kFloat64, "64-bit float")
      .value("INT8", DataType::kInt8, "8-bit signed integer (kiln.int8)")
      .value("UINT8", DataType::kUint8, "8-bit unsigned integer (kiln.uint8)")
      .value("INT16", DataType::kInt16, "16-bit signed integer")
      .value("UINT16", DataType::kUint16, "16-bit unsigned integer")
      .value("INT32", DataType::kInt32, "32-bit signed integer (kiln.int32)")
      .value("UINT32", DataType::kUint32, "32-bit unsigned integer")
      .value("INT64", DataType::kInt64, "64-bit signed integer (kiln.int64)")
      .value("UINT64", DataType::kUint64, "64-bit unsigned integer")
      .value("BOOL", DataType::kBool, "boolean (kiln.bool)")
      .value("FP8", DataType::kFloat8E4M3FN, "float8 e4m3fn")
      .value("INT4", DataType::kInt4, "4-bit signed integer (one per byte)")
      .value("STRING", DataType::kString, "string");
  nb::enum_<ActivationType>(
      m, "ActivationType", nb::is_arithmetic(),
      "Activations of add_activation (alpha and beta as ONNX's operators take them).")
      .value("RELU", ActivationType::kRELU)
      .value("SIGMOID", ActivationType::kSIGMOID)
      .value("TANH", ActivationType::kTANH)
      .value("LEAKY_RELU", ActivationType::kLEAKY_RELU)
      .value("ELU", ActivationType::kELU)
      .value("SELU", ActivationType::kSELU)
      .value("SOFTSIGN", ActivationType::kSOFTSIGN)
      .value("SOFTPLUS", ActivationType::kSOFTPLUS)
      .value("CLIP", ActivationType::kCLIP)
      .value("HARD_SIGMOID", ActivationType::kHARD_SIGMOID)
      .value("THRESHOLDED_RELU", ActivationType::kTHRESHOLDED_RELU);
  nb::enum_<PoolingType>(m, "PoolingType", nb::is_arithmetic(), "Pooling of add_pooling_nd.")
      .value("MAX", PoolingType::kMAX)
      .value("AVERAGE", PoolingType::kAVERAGE);
  nb::enum_<ElementWiseOperation>(m, "ElementWiseOperation", nb::is_arithmetic(),
                                  "Operations of add_elementwise.")
      .value("SUM", ElementWiseOperation::kSUM)
      .value("PROD", ElementWiseOperation::kPROD)
      .value("MAX", ElementWiseOperation::kMAX)
      .value("MIN", ElementWiseOperation::kMIN)
      .value("SUB", ElementWiseOperation::kSUB)
      .value("DIV", ElementWiseOperation::kDIV)
      .value("POW", ElementWiseOperation::kPOW);
  nb::enum_<MatrixOperation>(m, "MatrixOperation", nb::is_arithmetic(),
                             "add_matrix_multiply: TRANSPOSE swaps an operand's last two dims.")
      .value("NONE", MatrixOperation::kNONE)
      .value("TRANSPOSE", MatrixOperation::kTRANSPOSE);
  nb::enum_<ResizeMode>(m, "InterpolationMode", nb::is_arithmetic(),
                        "Resize interpolation (TensorRT 8: ResizeMode).")
      .value("NEAREST", ResizeMode::kNEAREST)
      .value("LINEAR", ResizeMode::kLINEAR)
      .value("CUBIC", ResizeMode::kCUBIC);
  m.attr("ResizeMode") = m.attr("InterpolationMode");  // TensorRT 8's name
}

void bindTensor(nb::module_& m) {
  nb::class_<ITensor>(m, "ITensor", "A tensor of a network (owned by the network).")
      .def_prop_rw(
          "name", &ITensor::getName,
          [](ITensor& t, const std::string& name) { check(t.setName(name)); },
          "The tensor's name; renaming to a name in use raises InvalidArgument.")
      .def_prop_ro(
          "shape", [](const ITensor& t) { return dimsTuple(t.getDimensions()); },
          "Dims as shape inference knows them; -1 where dynamic or unknown.")
      .def_prop_ro("dtype", &ITensor::getType)
      .def_prop_ro("is_network_input", &ITensor::isNetworkInput)
      .def_prop_ro("is_network_output", &ITensor::isNetworkOutput)
      .def("__repr__", [](const ITensor& t) {
        return "<kiln.ITensor '" + t.getName() + "' " + dataTypeName(t.getType()) +
               shapeToString(t.getDimensions()) + ">";
      });
}

void bindLayer(nb::module_& m) {
  auto cls = nb::class_<PyLayer>(
      m, "ILayer",
      "A layer of a network. Properties that belong to one kind of layer (stride_nd, "
      "reshape_dims, ...) raise AttributeError on the others.");
  cls.def_prop_rw(
         "name", [](const PyLayer& l) { return l.layer->getName(); },
         [](PyLayer& l, const std::string& name) { l.layer->setName(name); })
      .def_prop_ro(
          "type", [](const PyLayer& l) { return l.layer->getType(); },
          "The ONNX operator the layer runs (\"Conv\", \"MaxPool\", ...).")
      .def_prop_ro("num_inputs", [](const PyLayer& l) { return l.layer->getNbInputs(); })
      .def_prop_ro("num_outputs", [](const PyLayer& l) { return l.layer->getNbOutputs(); })
      .def(
          "get_input", [](const PyLayer& l, int i) { return l.layer->getInput(i); },
          nb::arg("index"), nb::rv_policy::reference_internal)
      .def(
          "get_output", [](const PyLayer& l, int i) { return l.layer->getOutput(i); },
          nb::arg("index"), nb::rv_policy::reference_internal)
      .def(
          "set_input",
          [](PyLayer& l, int index, ITensor& t) { check(l.layer->setInput(index, t)); },
          nb::arg("index"), nb::arg("tensor"))
      .def_prop_rw(
          "precision", [](const PyLayer& l) { return l.layer->getPrecision(); },
          [](PyLayer& l, DataType t) { l.layer->setPrecision(t); })
      .def(
          "set_output_type", [](PyLayer& l, int i, DataType t) { l.layer->setOutputType(i, t); },
          nb::arg("index"), nb::arg("dtype"))
      .def(
          "get_output_type", [](const PyLayer& l, int i) { return l.layer->getOutputType(i); },
          nb::arg("index"))
      .def("__repr__", [](const PyLayer& l) { return "<kiln.ILayer " + l.label() + ">"; });

  auto dims = [](const Shape& d) { return dimsTuple(d); };
  auto toDims = [](const char* what) { return [what](nb::handle v) { return dimsOf(v, what); }; };
  // Convolution and pooling (TensorRT 8's 2-D stride / padding are the same values).
  for (const char* name : {"stride_nd", "stride"}) {
    spatialProperty(cls, name, &ConvolutionParams::strides, &PoolingParams::strides,
                    "Strides, one per spatial dim.");
  }
  for (const char* name : {"padding_nd", "padding"}) {
    spatialProperty(cls, name, &ConvolutionParams::padding, &PoolingParams::padding,
                    "Symmetric padding, one per spatial dim.");
  }
  paramsProperty<ConvolutionParams>(
      cls, "dilation_nd", [=](const ConvolutionParams& p) { return dims(p.dilations); },
      [=](ConvolutionParams& p, nb::handle v) { p.dilations = toDims("dilation_nd")(v); },
      "Convolution dilations.");
  paramsProperty<ConvolutionParams>(
      cls, "num_groups", [](const ConvolutionParams& p) { return p.groups; },
      [](ConvolutionParams& p, nb::handle v) { p.groups = nb::cast<int64_t>(v); },
      "Convolution groups (the kernel's size must fit the new count).");
  paramsProperty<PoolingParams>(
      cls, "average_count_excludes_padding",
      [](const PoolingParams& p) { return p.averageCountExcludesPadding; },
      [](PoolingParams& p, nb::handle v) { p.averageCountExcludesPadding = nb::cast<bool>(v); },
      "Average pooling: divide by the count of non-padding values.");
  // Activation
  paramsProperty<ActivationParams>(
      cls, "alpha", [](const ActivationParams& p) { return p.alpha; },
      [](ActivationParams& p, nb::handle v) { p.alpha = nb::cast<float>(v); },
      "Activation alpha (LEAKY_RELU slope, CLIP min, ...).");
  paramsProperty<ActivationParams>(
      cls, "beta", [](const ActivationParams& p) { return p.beta; },
      [](ActivationParams& p, nb::handle v) { p.beta = nb::cast<float>(v); },
      "Activation beta (CLIP max, ...).");
  paramsProperty<ActivationParams>(
      cls, "activation_type", [](const ActivationParams& p) { return p.type; },
      [](ActivationParams& p, nb::handle v) { p.type = nb::cast<ActivationType>(v); }, "");
  // Softmax: TensorRT's axes bitmask (one bit).
  cls.def_prop_rw(
      "axes",
      [](const PyLayer& l) {
        int64_t axis = paramsOf<SoftMaxParams>(l, "axes").axis;
        if (axis < 0) axis += static_cast<int64_t>(l.layer->getInput(0)->getDimensions().size());
        return int64_t{1} << axis;
      },
      [](PyLayer& l, uint64_t axes) {
        if (axes == 0 || (axes & (axes - 1)) != 0) {
          throw Error(ErrorCode::kInvalidArgument,
                      l.label() + ": axes must have exactly one bit set (1 << axis), got " +
                          std::to_string(axes));
        }
        updateParams<SoftMaxParams>(l, "axes",
                                    [&](SoftMaxParams& p) { p.axis = __builtin_ctzll(axes); });
      },
      "Softmax: the axis as a bitmask, 1 << axis.");
  // Shuffle
  paramsProperty<ShuffleParams>(
      cls, "first_transpose", [=](const ShuffleParams& p) { return dims(p.firstTranspose); },
      [=](ShuffleParams& p, nb::handle v) { p.firstTranspose = toDims("first_transpose")(v); },
      "Shuffle: the permutation before the reshape.");
  paramsProperty<ShuffleParams>(
      cls, "reshape_dims",
      [=](const ShuffleParams& p) {
        return p.hasReshape ? nb::object(dims(p.reshapeDims)) : nb::none();
      },
      [=](ShuffleParams& p, nb::handle v) {
        p.hasReshape = !v.is_none();
        p.reshapeDims = v.is_none() ? Shape{} : toDims("reshape_dims")(v);
      },
      "Shuffle: the reshape (0 copies a dim, -1 is inferred), None for none.");
  paramsProperty<ShuffleParams>(
      cls, "second_transpose", [=](const ShuffleParams& p) { return dims(p.secondTranspose); },
      [=](ShuffleParams& p, nb::handle v) { p.secondTranspose = toDims("second_transpose")(v); },
      "Shuffle: the permutation after the reshape.");
  // Resize
  paramsProperty<ResizeParams>(
      cls, "scales", [](const ResizeParams& p) { return p.scales; },
      [](ResizeParams& p, nb::handle v) {
        p.scales = nb::cast<std::vector<float>>(v);
        p.outputDims.clear();
      },
      "Resize: one scale per dim (replaces shape).");
  paramsProperty<ResizeParams>(
      cls, "shape", [=](const ResizeParams& p) { return dims(p.outputDims); },
      [=](ResizeParams& p, nb::handle v) {
        p.outputDims = toDims("shape")(v);
        p.scales.clear();
      },
      "Resize: the output shape (replaces scales).");
  paramsProperty<ResizeParams>(
      cls, "resize_mode", [](const ResizeParams& p) { return p.mode; },
      [](ResizeParams& p, nb::handle v) { p.mode = nb::cast<ResizeMode>(v); },
      "Resize: kiln.InterpolationMode.");
  paramsProperty<ResizeParams>(
      cls, "coordinate_transformation",
      [](const ResizeParams& p) { return p.coordinateTransformation; },
      [](ResizeParams& p, nb::handle v) { p.coordinateTransformation = nb::cast<std::string>(v); },
      "Resize: ONNX's coordinate_transformation_mode (\"half_pixel\", \"asymmetric\", ...).");
  paramsProperty<ResizeParams>(
      cls, "nearest_rounding", [](const ResizeParams& p) { return p.nearestMode; },
      [](ResizeParams& p, nb::handle v) { p.nearestMode = nb::cast<std::string>(v); },
      "Resize: ONNX's nearest_mode (\"round_prefer_floor\", \"floor\", ...).");
  // Concatenation
  paramsProperty<ConcatenationParams>(
      cls, "axis", [](const ConcatenationParams& p) { return p.axis; },
      [](ConcatenationParams& p, nb::handle v) { p.axis = nb::cast<int64_t>(v); },
      "Concatenation axis.");
}

void bindNetwork(nb::module_& m) {
  auto cls = nb::class_<PyNetwork>(
      m, "INetworkDefinition", "A network built layer by layer (or filled by kiln.OnnxParser).");
  cls.def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](nb::handle, nb::args) { return false; })
      .def(
          "add_input",
          [](PyNetwork& n, const std::string& name, nb::handle dtype, nb::handle shape) {
            DataType type = nb::cast<DataType>(
                nb::module_::import_("kiln._trt_types").attr("data_type")(dtype));
            ITensor* t = n.network->addInput(name, type, dimsOf(shape, "shape"));
            if (!t) refused(n, "add_input '" + name + "'");
            return t;
          },
          nb::arg("name"), nb::arg("dtype"), nb::arg("shape"), nb::rv_policy::reference_internal,
          "Adds an input; dtype is a kiln.DataType or numpy dtype, shape has -1 for dynamic dims.")
      .def(
          "mark_output", [](PyNetwork& n, ITensor& t) { check(n.network->markOutput(t)); },
          nb::arg("tensor"))
      .def(
          "add_convolution_nd",
          [](nb::handle self, ITensor& input, int64_t maps, nb::handle kernelShape,
             nb::handle kernel, nb::handle bias, int64_t groups) {
            HostWeights k = weightsOf(kernel, "kernel"), b = weightsOf(bias, "bias");
            ConvolutionParams params;
            params.groups = groups;
            return checked(
                self,
                net(self).addConvolution(input, maps, dimsOf(kernelShape, "kernel_shape"),
                                         k.weights(), b.weights(), params),
                "add_convolution_nd");
          },
          nb::arg("input"), nb::arg("num_output_maps"), nb::arg("kernel_shape"), nb::arg("kernel"),
          nb::arg("bias").none() = nb::none(), nb::arg("num_groups") = 1,
          "Convolution with OIHW kernel weights (numpy); set stride_nd, padding_nd, dilation_nd "
          "afterwards.")
      .def(
          "add_pooling_nd",
          [](nb::handle self, ITensor& input, PoolingType type, nb::handle window) {
            return checked(self, net(self).addPooling(input, type, dimsOf(window, "window_size")),
                           "add_pooling_nd");
          },
          nb::arg("input"), nb::arg("type"), nb::arg("window_size"),
          "Max or average pooling (stride 1, no padding until set).")
      .def(
          "add_activation",
          [](nb::handle self, ITensor& input, ActivationType type) {
            return checked(self, net(self).addActivation(input, type), "add_activation");
          },
          nb::arg("input"), nb::arg("type"))
      .def(
          "add_elementwise",
          [](nb::handle self, ITensor& a, ITensor& b, ElementWiseOperation op) {
            return checked(self, net(self).addElementWise(a, b, op), "add_elementwise");
          },
          nb::arg("input1"), nb::arg("input2"), nb::arg("op"),
          "Element-wise operation with numpy broadcasting.")
      .def(
          "add_matrix_multiply",
          [](nb::handle self, ITensor& a, MatrixOperation opA, ITensor& b, MatrixOperation opB) {
            return checked(self, net(self).addMatrixMultiply(a, opA, b, opB),
                           "add_matrix_multiply");
          },
          nb::arg("input0"), nb::arg("op0"), nb::arg("input1"), nb::arg("op1"))
      .def(
          "add_fully_connected",
          [](nb::handle self, ITensor& input, int64_t outputs, nb::handle kernel, nb::handle bias) {
            HostWeights k = weightsOf(kernel, "kernel"), b = weightsOf(bias, "bias");
            return checked(self,
                           net(self).addFullyConnected(input, outputs, k.weights(), b.weights()),
                           "add_fully_connected");
          },
          nb::arg("input"), nb::arg("num_outputs"), nb::arg("kernel"),
          nb::arg("bias").none() = nb::none(),
          "y = x W^T + b, W of shape [num_outputs, K] (TensorRT 8's layer).")
      .def(
          "add_softmax",
          [](nb::handle self, ITensor& input) {
            return checked(self, net(self).addSoftMax(input, -1), "add_softmax");
          },
          nb::arg("input"), "Softmax over the last axis until axes is set.")
      .def(
          "add_shuffle",
          [](nb::handle self, ITensor& input) {
            return checked(self, net(self).addShuffle(input, {}), "add_shuffle");
          },
          nb::arg("input"),
          "Identity until first_transpose, reshape_dims or second_transpose is set.")
      .def(
          "add_concatenation",
          [](nb::handle self, nb::handle inputs) {
            std::vector<ITensor*> tensors = tensorList(inputs);
            return checked(self, net(self).addConcatenation(tensors, defaultConcatAxis(tensors)),
                           "add_concatenation");
          },
          nb::arg("inputs"),
          "Concatenation along TensorRT's default axis (rank - 3, or 0); set axis afterwards.")
      .def(
          "add_constant",
          [](nb::handle self, nb::handle shape, nb::handle weights) {
            HostWeights w = weightsOf(weights, "weights");
            return checked(self, net(self).addConstant(dimsOf(shape, "shape"), w.weights()),
                           "add_constant");
          },
          nb::arg("shape"), nb::arg("weights"))
      .def(
          "add_resize",
          [](nb::handle self, ITensor& input) {
            ResizeParams params;  // identity until scales or shape is set
            params.scales.assign(input.getDimensions().size(), 1.0f);
            return checked(self, net(self).addResize(input, params), "add_resize");
          },
          nb::arg("input"), "Resize (scales 1 until scales or shape is set; nearest, half_pixel).")
      .def(
          "add_plugin_v2",
          [](nb::handle self, nb::handle inputs, const PluginHandle& plugin) {
            return checked(self, net(self).addPlugin(tensorList(inputs), *plugin.plugin),
                           "add_plugin_v2");
          },
          nb::arg("inputs"), nb::arg("plugin"),
          "A plugin layer: a plugin made by a creator of kiln.get_plugin_registry() (or a "
          "kiln.custom_op).")
      .def_prop_ro("num_layers", [](const PyNetwork& n) { return n.network->getNbLayers(); })
      .def(
          "get_layer",
          [](nb::handle self, int i) {
            ILayer* l = net(self).getLayer(i);
            if (!l)
              throw nb::index_error(("layer index " + std::to_string(i) + " out of range").c_str());
            return pyLayer(self, l);
          },
          nb::arg("index"))
      .def_prop_ro("num_inputs", [](const PyNetwork& n) { return n.network->getNbInputs(); })
      .def(
          "get_input",
          [](const PyNetwork& n, int i) {
            ITensor* t = n.network->getInput(i);
            if (!t)
              throw nb::index_error(("input index " + std::to_string(i) + " out of range").c_str());
            return t;
          },
          nb::arg("index"), nb::rv_policy::reference_internal)
      .def_prop_ro("num_outputs", [](const PyNetwork& n) { return n.network->getNbOutputs(); })
      .def(
          "get_output",
          [](const PyNetwork& n, int i) {
            ITensor* t = n.network->getOutput(i);
            if (!t)
              throw nb::index_error(
                  ("output index " + std::to_string(i) + " out of range").c_str());
            return t;
          },
          nb::arg("index"), nb::rv_policy::reference_internal)
      .def_prop_ro("flags", [](const PyNetwork& n) { return n.flags; })
      .def("__len__", [](const PyNetwork& n) { return n.network->getNbLayers(); });
  // TensorRT 8's names for the same layers.
  for (auto [alias, name] :
       {std::pair{"add_convolution", "add_convolution_nd"},
        std::pair{"add_pooling", "add_pooling_nd"}, std::pair{"add_plugin", "add_plugin_v2"}}) {
    cls.attr(alias) = cls.attr(name);
  }
}

}  // namespace

void bindTrtNetwork(nb::module_& m) {
  bindEnums(m);
  bindTensor(m);
  bindLayer(m);
  bindNetwork(m);
}

}  // namespace kiln::python
