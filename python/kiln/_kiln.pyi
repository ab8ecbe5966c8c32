"""kiln's compiled bindings; use the kiln package, which wraps them."""

from collections.abc import Sequence
import enum
from typing import TypeAlias

from kiln.capi.onnxruntime_pybind11_state import (
    EPFail as EPFail,
    EngineError as EngineError,
    Fail as Fail,
    InvalidArgument as InvalidArgument,
    InvalidGraph as InvalidGraph,
    InvalidProtobuf as InvalidProtobuf,
    ModelLoaded as ModelLoaded,
    NoModel as NoModel,
    NoSuchFile as NoSuchFile,
    NotImplemented as NotImplemented,
    RuntimeException as RuntimeException
)


class TensorBuffer:
    """
    kiln-owned storage of an output; the numpy array returned by run views it (its .base).
    """

    @property
    def address(self) -> int:
        """Address of the tensor's first element."""

class RunFlag:
    """A flag another thread may set to stop a run (RunOptions.terminate)."""

    def __init__(self) -> None: ...

    @property
    def value(self) -> bool:
        """True once the runs given this flag should stop."""

    @value.setter
    def value(self, arg: bool, /) -> None: ...

class Session:
    """A loaded model (kiln::Session); kiln.InferenceSession wraps it."""

    def __init__(self, path: str, threads: int = 0, optimize: bool = True, nchwc_layout: bool = True, profile: bool = False, max_loop_iterations: int = 0, extra_outputs: Sequence[str] = [], mark_all_outputs: bool = False, bf16: bool = False, fp16: bool = False, allocation_limit_bytes: int = 0) -> None:
        """
        Loads and prepares the model file at `path`; extra_outputs (and with mark_all_outputs every node output) become outputs after the model's own.
        """

    @staticmethod
    def from_bytes(data: bytes, threads: int = 0, optimize: bool = True, nchwc_layout: bool = True, profile: bool = False, max_loop_iterations: int = 0, extra_outputs: Sequence[str] = [], mark_all_outputs: bool = False, bf16: bool = False, fp16: bool = False, allocation_limit_bytes: int = 0, external_data_dir: str = '') -> Session:
        """
        Loads a serialized ModelProto; external data files are looked up in external_data_dir.
        """

    def inputs(self) -> list:
        """
        [(name, shape, type, overridable)] of the model's inputs; shape holds ints, dim names and None.
        """

    def outputs(self) -> list:
        """[(name, shape, type, False)] of the outputs."""

    def metadata(self) -> dict:
        """The model's ModelMetadata fields as a dict."""

    def run(self, output_names: object | None, input_feed: dict, terminate: RunFlag | None = None) -> list:
        """
        Runs the model with the GIL released; returns the named outputs (all when None) in order. The run stops with an error once `terminate` (a RunFlag) is set, from any thread.
        """

    def take_profile(self, pid: int) -> str:
        """
        The trace events recorded since the last call (profile=True), as Chrome-trace JSON.
        """

def load_plugin_library(path: str) -> None:
    """
    Loads a kiln plugin library (.so); its plugins then serve the ops they name.
    """

class DimExpr:
    """
    A dim as an expression of input dims, for custom-op shape functions: combine with + - * // and ints, kiln.DimExpr.max / min / ceil_div.
    """

    def __init__(self, value: int) -> None: ...

    def __add__(self, arg: DimExpr, /) -> DimExpr: ...

    def __sub__(self, arg: DimExpr, /) -> DimExpr: ...

    def __mul__(self, arg: DimExpr, /) -> DimExpr: ...

    def __floordiv__(self, arg: DimExpr, /) -> DimExpr: ...

    def __radd__(self, arg: int, /) -> DimExpr: ...

    def __rsub__(self, arg: int, /) -> DimExpr: ...

    def __rmul__(self, arg: int, /) -> DimExpr: ...

    def __rfloordiv__(self, arg: int, /) -> DimExpr: ...

    @staticmethod
    def max(arg0: DimExpr, arg1: DimExpr, /) -> DimExpr: ...

    @staticmethod
    def min(arg0: DimExpr, arg1: DimExpr, /) -> DimExpr: ...

    @staticmethod
    def ceil_div(arg0: DimExpr, arg1: DimExpr, /) -> DimExpr: ...

    @property
    def constant(self) -> object:
        """The value of a constant expression, None otherwise."""

    def __repr__(self) -> str: ...

class PluginFieldType(enum.IntEnum):
    """Types of plugin fields (kiln's: ints, floats, strings, tensors)."""

    INT = 0

    FLOAT = 1

    STRING = 2

    INTS = 3

    FLOATS = 4

    STRINGS = 5

    TENSOR = 6

class PluginFieldSpec:
    """A field a creator accepts."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> PluginFieldType: ...

    @property
    def required(self) -> bool: ...

    def __repr__(self) -> str: ...

class IPluginV2:
    """A plugin made by a creator; add it with network.add_plugin_v2."""

    @property
    def plugin_type(self) -> str: ...

    @property
    def plugin_version(self) -> str: ...

    @property
    def plugin_namespace(self) -> str: ...

    @property
    def num_outputs(self) -> int: ...

    @property
    def name(self) -> str: ...

class IPluginCreator:
    """A registered plugin creator."""

    @property
    def name(self) -> str: ...

    @property
    def plugin_version(self) -> str: ...

    @property
    def plugin_namespace(self) -> str: ...

    @property
    def field_names(self) -> list[PluginFieldSpec]:
        """The fields it accepts (empty: any)."""

    def create_plugin(self, name: str, field_collection: object | None = None) -> IPluginV2:
        """
        A plugin from fields (a kiln.PluginFieldCollection or a dict name -> value), checked against field_names.
        """

    def __repr__(self) -> str: ...

class IPluginRegistry:
    """kiln's process-wide plugin registry."""

    @property
    def plugin_creator_list(self) -> list[IPluginCreator]: ...

    def get_plugin_creator(self, type: str, version: str = '', plugin_namespace: str = '') -> object:
        """
        The creator of (type, version, namespace); an empty version picks the highest; None if there is none.
        """

    @property
    def loaded_libraries(self) -> list[str]: ...

def get_plugin_registry() -> IPluginRegistry:
    """The plugin registry (C++ plugins, libraries, custom ops)."""

class DataType(enum.IntEnum):
    """Element types (TensorRT's names; values are ONNX's)."""

    FLOAT = 1
    """32-bit float (kiln.float32)"""

    HALF = 10
    """16-bit float (kiln.float16)"""

    BF16 = 16
    """bfloat16 (kiln.bfloat16; numpy arrays through ml_dtypes)"""

    DOUBLE = 11
    """64-bit float"""

    INT8 = 3
    """8-bit signed integer (kiln.int8)"""

    UINT8 = 2
    """8-bit unsigned integer (kiln.uint8)"""

    INT16 = 5
    """16-bit signed integer"""

    UINT16 = 4
    """16-bit unsigned integer"""

    INT32 = 6
    """32-bit signed integer (kiln.int32)"""

    UINT32 = 12
    """32-bit unsigned integer"""

    INT64 = 7
    """64-bit signed integer (kiln.int64)"""

    UINT64 = 13
    """64-bit unsigned integer"""

    BOOL = 9
    """boolean (kiln.bool)"""

    FP8 = 17
    """float8 e4m3fn"""

    INT4 = 22
    """4-bit signed integer (one per byte)"""

    STRING = 8
    """string"""

class ActivationType(enum.IntEnum):
    """
    Activations of add_activation (alpha and beta as ONNX's operators take them).
    """

    RELU = 0

    SIGMOID = 1

    TANH = 2

    LEAKY_RELU = 3

    ELU = 4

    SELU = 5

    SOFTSIGN = 6

    SOFTPLUS = 7

    CLIP = 8

    HARD_SIGMOID = 9

    THRESHOLDED_RELU = 10

class PoolingType(enum.IntEnum):
    """Pooling of add_pooling_nd."""

    MAX = 0

    AVERAGE = 1

class ElementWiseOperation(enum.IntEnum):
    """Operations of add_elementwise."""

    SUM = 0

    PROD = 1

    MAX = 2

    MIN = 3

    SUB = 4

    DIV = 5

    POW = 6

class MatrixOperation(enum.IntEnum):
    """add_matrix_multiply: TRANSPOSE swaps an operand's last two dims."""

    NONE = 0

    TRANSPOSE = 1

class InterpolationMode(enum.IntEnum):
    """Resize interpolation (TensorRT 8: ResizeMode)."""

    NEAREST = 0

    LINEAR = 1

    CUBIC = 2

ResizeMode: TypeAlias = InterpolationMode

class ITensor:
    """A tensor of a network (owned by the network)."""

    @property
    def name(self) -> str:
        """The tensor's name; renaming to a name in use raises InvalidArgument."""

    @name.setter
    def name(self, arg: str, /) -> None: ...

    @property
    def shape(self) -> tuple:
        """Dims as shape inference knows them; -1 where dynamic or unknown."""

    @property
    def dtype(self) -> DataType: ...

    @property
    def is_network_input(self) -> bool: ...

    @property
    def is_network_output(self) -> bool: ...

    def __repr__(self) -> str: ...

class ILayer:
    """
    A layer of a network. Properties that belong to one kind of layer (stride_nd, reshape_dims, ...) raise AttributeError on the others.
    """

    @property
    def name(self) -> str: ...

    @name.setter
    def name(self, arg: str, /) -> None: ...

    @property
    def type(self) -> str:
        """The ONNX operator the layer runs ("Conv", "MaxPool", ...)."""

    @property
    def num_inputs(self) -> int: ...

    @property
    def num_outputs(self) -> int: ...

    def get_input(self, index: int) -> ITensor: ...

    def get_output(self, index: int) -> ITensor: ...

    def set_input(self, index: int, tensor: ITensor) -> None: ...

    @property
    def precision(self) -> DataType: ...

    @precision.setter
    def precision(self, arg: DataType, /) -> None: ...

    def set_output_type(self, index: int, dtype: DataType) -> None: ...

    def get_output_type(self, index: int) -> DataType: ...

    def __repr__(self) -> str: ...

    @property
    def stride_nd(self) -> tuple:
        """Strides, one per spatial dim."""

    @stride_nd.setter
    def stride_nd(self, arg: object, /) -> None: ...

    @property
    def stride(self) -> tuple:
        """Strides, one per spatial dim."""

    @stride.setter
    def stride(self, arg: object, /) -> None: ...

    @property
    def padding_nd(self) -> tuple:
        """Symmetric padding, one per spatial dim."""

    @padding_nd.setter
    def padding_nd(self, arg: object, /) -> None: ...

    @property
    def padding(self) -> tuple:
        """Symmetric padding, one per spatial dim."""

    @padding.setter
    def padding(self, arg: object, /) -> None: ...

    @property
    def dilation_nd(self) -> tuple:
        """Convolution dilations."""

    @dilation_nd.setter
    def dilation_nd(self, value: object | None) -> None: ...

    @property
    def num_groups(self) -> int:
        """Convolution groups (the kernel's size must fit the new count)."""

    @num_groups.setter
    def num_groups(self, value: object | None) -> None: ...

    @property
    def average_count_excludes_padding(self) -> bool:
        """Average pooling: divide by the count of non-padding values."""

    @average_count_excludes_padding.setter
    def average_count_excludes_padding(self, value: object | None) -> None: ...

    @property
    def alpha(self) -> float:
        """Activation alpha (LEAKY_RELU slope, CLIP min, ...)."""

    @alpha.setter
    def alpha(self, value: object | None) -> None: ...

    @property
    def beta(self) -> float:
        """Activation beta (CLIP max, ...)."""

    @beta.setter
    def beta(self, value: object | None) -> None: ...

    @property
    def activation_type(self) -> ActivationType: ...

    @activation_type.setter
    def activation_type(self, value: object | None) -> None: ...

    @property
    def axes(self) -> int:
        """Softmax: the axis as a bitmask, 1 << axis."""

    @axes.setter
    def axes(self, arg: int, /) -> None: ...

    @property
    def first_transpose(self) -> tuple:
        """Shuffle: the permutation before the reshape."""

    @first_transpose.setter
    def first_transpose(self, value: object | None) -> None: ...

    @property
    def reshape_dims(self) -> object:
        """Shuffle: the reshape (0 copies a dim, -1 is inferred), None for none."""

    @reshape_dims.setter
    def reshape_dims(self, value: object | None) -> None: ...

    @property
    def second_transpose(self) -> tuple:
        """Shuffle: the permutation after the reshape."""

    @second_transpose.setter
    def second_transpose(self, value: object | None) -> None: ...

    @property
    def scales(self) -> list[float]:
        """Resize: one scale per dim (replaces shape)."""

    @scales.setter
    def scales(self, value: object | None) -> None: ...

    @property
    def shape(self) -> tuple:
        """Resize: the output shape (replaces scales)."""

    @shape.setter
    def shape(self, value: object | None) -> None: ...

    @property
    def resize_mode(self) -> InterpolationMode:
        """Resize: kiln.InterpolationMode."""

    @resize_mode.setter
    def resize_mode(self, value: object | None) -> None: ...

    @property
    def coordinate_transformation(self) -> str:
        """
        Resize: ONNX's coordinate_transformation_mode ("half_pixel", "asymmetric", ...).
        """

    @coordinate_transformation.setter
    def coordinate_transformation(self, value: object | None) -> None: ...

    @property
    def nearest_rounding(self) -> str:
        """Resize: ONNX's nearest_mode ("round_prefer_floor", "floor", ...)."""

    @nearest_rounding.setter
    def nearest_rounding(self, value: object | None) -> None: ...

    @property
    def axis(self) -> int:
        """Concatenation axis."""

    @axis.setter
    def axis(self, value: object | None) -> None: ...

class INetworkDefinition:
    """A network built layer by layer (or filled by kiln.OnnxParser)."""

    def __enter__(self) -> object: ...

    def __exit__(self, *args) -> bool: ...

    def add_input(self, name: str, dtype: object, shape: object) -> ITensor:
        """
        Adds an input; dtype is a kiln.DataType or numpy dtype, shape has -1 for dynamic dims.
        """

    def mark_output(self, tensor: ITensor) -> None: ...

    def add_convolution_nd(self, input: ITensor, num_output_maps: int, kernel_shape: object, kernel: object, bias: object | None = None, num_groups: int = 1) -> ILayer:
        """
        Convolution with OIHW kernel weights (numpy); set stride_nd, padding_nd, dilation_nd afterwards.
        """

    def add_pooling_nd(self, input: ITensor, type: PoolingType, window_size: object) -> ILayer:
        """Max or average pooling (stride 1, no padding until set)."""

    def add_activation(self, input: ITensor, type: ActivationType) -> ILayer: ...

    def add_elementwise(self, input1: ITensor, input2: ITensor, op: ElementWiseOperation) -> ILayer:
        """Element-wise operation with numpy broadcasting."""

    def add_matrix_multiply(self, input0: ITensor, op0: MatrixOperation, input1: ITensor, op1: MatrixOperation) -> ILayer: ...

    def add_fully_connected(self, input: ITensor, num_outputs: int, kernel: object, bias: object | None = None) -> ILayer:
        """y = x W^T + b, W of shape [num_outputs, K] (TensorRT 8's layer)."""

    def add_softmax(self, input: ITensor) -> ILayer:
        """Softmax over the last axis until axes is set."""

    def add_shuffle(self, input: ITensor) -> ILayer:
        """
        Identity until first_transpose, reshape_dims or second_transpose is set.
        """

    def add_concatenation(self, inputs: object) -> ILayer:
        """
        Concatenation along TensorRT's default axis (rank - 3, or 0); set axis afterwards.
        """

    def add_constant(self, shape: object, weights: object) -> ILayer: ...

    def add_resize(self, input: ITensor) -> ILayer:
        """Resize (scales 1 until scales or shape is set; nearest, half_pixel)."""

    def add_plugin_v2(self, inputs: object, plugin: IPluginV2) -> ILayer:
        """
        A plugin layer: a plugin made by a creator of kiln.get_plugin_registry() (or a kiln.custom_op).
        """

    @property
    def num_layers(self) -> int: ...

    def get_layer(self, index: int) -> ILayer: ...

    @property
    def num_inputs(self) -> int: ...

    def get_input(self, index: int) -> ITensor: ...

    @property
    def num_outputs(self) -> int: ...

    def get_output(self, index: int) -> ITensor: ...

    @property
    def flags(self) -> int: ...

    def __len__(self) -> int: ...

    add_convolution = add_convolution_nd

    add_pooling = add_pooling_nd

    add_plugin = add_plugin_v2

class ITimingCache:
    """Tactic times of earlier builds (kiln::ITimingCache)."""

    def serialize(self) -> bytes:
        """
        The cache as bytes, to write to a file and pass to create_timing_cache later.
        """

    def combine(self, input_cache: ITimingCache, ignore_mismatch: bool = False) -> bool:
        """
        Adds the other cache's entries this one lacks (entries of other CPUs are kept and never used here).
        """

    def reset(self) -> bool: ...

    def __len__(self) -> int: ...

    @property
    def entries_for_other_cpus(self) -> int: ...

class IHostMemory:
    """
    A serialized engine (plan); supports the buffer protocol, so open(path, 'wb').write(plan) and bytes(plan) work.
    """

    @property
    def nbytes(self) -> int: ...

    def __len__(self) -> int: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *args) -> bool: ...

class BuilderFlag(enum.IntEnum):
    """Build flags, numbered by bit as TensorRT's (1 << int(flag))."""

    FP16 = 0
    """
    Allow FP16 layers (accepted; layers still run in float32, with a warning).
    """

    INT8 = 1
    """
    Allow INT8 layers: with config.int8_calibrator, Conv/MatMul/Gemm are quantized.
    """

    DISABLE_NCHWC_LAYOUT = 2
    """Keep every tensor NCHW (kiln's own flag)."""

    BF16 = 3
    """
    Allow BF16 Conv, MatMul and Gemm layers (FP32 sums) where the CPU has AVX512_BF16 and the builder measures them faster (else FP32, with a warning without AVX512_BF16).
    """

    OBEY_PRECISION_CONSTRAINTS = 4
    """
    Layer precisions (ILayer.precision) must be met; the build fails where one cannot.
    """

    PREFER_PRECISION_CONSTRAINTS = 5
    """
    Layer precisions (ILayer.precision) are met where a kernel allows, else a warning.
    """

class MemoryPoolType(enum.IntEnum):
    """
    Memory pools of set_memory_pool_limit (WORKSPACE: the activation arena).
    """

    WORKSPACE = 0

class NetworkDefinitionCreationFlag(enum.IntEnum):
    """
    create_network flags, accepted as TensorRT's (kiln networks always have explicit batch dims).
    """

    EXPLICIT_BATCH = 0

    STRONGLY_TYPED = 1

class IOptimizationProfile:
    """The min/opt/max shapes of dynamic inputs (and values of shape inputs)."""

    def set_shape(self, input: str, min: object, opt: object, max: object) -> None:
        """
        Shapes input `input` will be run with (checked when the engine is built).
        """

    def get_shape(self, input: str) -> list:
        """[min, opt, max] of an input; empty tuples when not set."""

    def set_shape_input(self, input: str, min: object, opt: object, max: object) -> None:
        """Value ranges of a shape input."""

    def get_shape_input(self, input: str) -> list: ...

    def __bool__(self) -> bool:
        """True when some input has shapes set."""

class CalibrationAlgoType(enum.Enum):
    """How INT8 calibration chooses activation ranges."""

    ENTROPY_CALIBRATION_2 = 2
    """The threshold of least KL divergence (TensorRT's entropy calibration)."""

    MINMAX_CALIBRATION = 3
    """The smallest and largest value seen."""

    PERCENTILE_CALIBRATION = 4
    """The get_percentile()-th percentile of |x| (kiln's own)."""

class IBuilderConfig:
    """
    Build options: flags, memory limit, threads, optimization profiles, INT8 calibrator.
    """

    @property
    def int8_calibrator(self) -> object:
        """
        The INT8 calibrator (a subclass of kiln.IInt8EntropyCalibrator2, IInt8MinMaxCalibrator or IInt8PercentileCalibrator) used with BuilderFlag.INT8; None for none.
        """

    @int8_calibrator.setter
    def int8_calibrator(self, calibrator: object | None) -> None: ...

    def set_flag(self, flag: BuilderFlag) -> None: ...

    def clear_flag(self, flag: BuilderFlag) -> None: ...

    def get_flag(self, flag: BuilderFlag) -> bool: ...

    @property
    def flags(self) -> int:
        """The flags as a bitmask: bit int(BuilderFlag.X) for each flag set."""

    @flags.setter
    def flags(self, arg: int, /) -> None: ...

    def set_memory_pool_limit(self, pool: MemoryPoolType, pool_size: int) -> None:
        """
        Largest activation arena the engine may need at the profiles' max shapes.
        """

    def get_memory_pool_limit(self, pool: MemoryPoolType) -> int: ...

    @property
    def max_workspace_size(self) -> int:
        """TensorRT 8's name for the WORKSPACE pool limit."""

    @max_workspace_size.setter
    def max_workspace_size(self, arg: int, /) -> None: ...

    @property
    def num_threads(self) -> int:
        """
        Intra-op threads of the engine's contexts; 0: one per hardware thread (kiln's own).
        """

    @num_threads.setter
    def num_threads(self, arg: int, /) -> None: ...

    @property
    def builder_optimization_level(self) -> int:
        """
        0: heuristic kernel choices, no timing; 1..5 (default 3): time the candidate kernels of conv, GEMM and MatMul layers and keep the fastest (docs/cpp-api.md).
        """

    @builder_optimization_level.setter
    def builder_optimization_level(self, arg: int, /) -> None: ...

    def create_timing_cache(self, serialized_timing_cache: bytes) -> ITimingCache:
        """
        An ITimingCache from ITimingCache.serialize()'s bytes (b'' for an empty one).
        """

    def set_timing_cache(self, cache: object | None, ignore_mismatch: bool = False) -> bool:
        """
        Times of earlier builds to use, and to add this build's to; None: no cache.
        """

    def get_timing_cache(self) -> object: ...

    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        """Adds a copy of the profile; returns its index."""

    @property
    def num_optimization_profiles(self) -> int: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *args) -> bool: ...

class Builder:
    """Builds engines (plans) from networks, as TensorRT's trt.Builder."""

    def __init__(self, logger: object) -> None: ...

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        """
        A new empty network. Every kiln network has explicit batch dims, so flags (TensorRT's 1 << EXPLICIT_BATCH) are accepted and kept.
        """

    def create_builder_config(self) -> IBuilderConfig: ...

    def create_optimization_profile(self) -> IOptimizationProfile: ...

    def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> IHostMemory:
        """
        Optimizes the network, checks it over every profile and serializes the engine; raises (naming the layer, input or profile) when it cannot be built.
        """

    def build_engine(self, network: INetworkDefinition, config: IBuilderConfig) -> object:
        """TensorRT 8's build: build_serialized_network, then deserialized."""

    @property
    def platform_has_fast_fp16(self) -> bool: ...

    @property
    def platform_has_fast_int8(self) -> bool: ...

    @property
    def max_batch_size(self) -> int:
        """
        TensorRT 7's implicit batch size: accepted and ignored (batch dims are explicit).
        """

    @max_batch_size.setter
    def max_batch_size(self, arg: int, /) -> None: ...

    @property
    def logger(self) -> object: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *args) -> bool: ...

class ErrorCode(enum.IntEnum):
    """Codes of OnnxParser errors."""

    SUCCESS = 0

    INTERNAL_ERROR = 1

    IO_ERROR = 2

    MODEL_DESERIALIZE_FAILED = 3

    INVALID_GRAPH = 4

    INVALID_NODE = 5

    INVALID_VALUE = 6

    UNSUPPORTED_NODE = 7

class ParserError:
    """An error of OnnxParser.parse: what, where (node) and its code."""

    def code(self) -> ErrorCode: ...

    def desc(self) -> str: ...

    def node(self) -> int:
        """The node's index; -1 when not about one."""

    def node_name(self) -> str: ...

    def node_operator(self) -> str: ...

    def __str__(self) -> str: ...

    def __repr__(self) -> str: ...

class OnnxParser:
    """Fills an empty network from an ONNX model."""

    def __init__(self, network: object, logger: object) -> None: ...

    def parse(self, model: object, path: object | None = None) -> bool:
        """
        Parses a serialized ModelProto (bytes or any buffer); `path`, when given, locates external data. Returns False on failure: num_errors and get_error(i) say why.
        """

    def parse_from_file(self, model: str) -> bool:
        """Parses an ONNX file; False on failure (see get_error)."""

    @property
    def num_errors(self) -> int: ...

    def get_error(self, index: int) -> ParserError: ...

    def clear_errors(self) -> None: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *args) -> bool: ...

class TensorIOMode(enum.IntEnum):
    """Whether an engine tensor is an input or an output."""

    NONE = 0

    INPUT = 1

    OUTPUT = 2

class Runtime:
    """Loads serialized engines (plans)."""

    def __init__(self, logger: object) -> None: ...

    def deserialize_engine(self, serialized_engine: object) -> object:
        """
        The engine of a plan (bytes, kiln.IHostMemory or any buffer); raises kiln.Fail naming what is wrong with a truncated, corrupted or other-version plan, or a plugin it needs that is not registered.
        """

    def deserialize_cuda_engine(self, serialized_engine: object) -> object:
        """TensorRT's name for deserialize_engine."""

    def __enter__(self) -> object: ...

    def __exit__(self, *args) -> bool: ...

class ICudaEngine:
    """A built engine (immutable; many contexts may share it)."""

    @property
    def num_io_tensors(self) -> int: ...

    def get_tensor_name(self, index: int) -> str:
        """Inputs first, then outputs."""

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        """TensorIOMode.INPUT / OUTPUT; NONE for a name the engine does not have."""

    def get_tensor_shape(self, name: str) -> tuple:
        """-1 where a dim is dynamic."""

    def get_tensor_dtype(self, name: str) -> DataType: ...

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list:
        """[min, opt, max] of an input in a profile."""

    @property
    def num_optimization_profiles(self) -> int: ...

    @property
    def num_layers(self) -> int: ...

    def serialize(self) -> bytes:
        """The plan the engine was loaded from."""

    def create_execution_context(self) -> IExecutionContext: ...

    @property
    def num_bindings(self) -> int: ...

    def binding_is_input(self, binding: object) -> bool: ...

    def get_binding_index(self, name: str) -> int:
        """-1 for a name the engine does not have."""

    def get_binding_name(self, index: int) -> str: ...

    def get_binding_shape(self, binding: object) -> tuple: ...

    def get_binding_dtype(self, binding: object) -> DataType: ...

    def get_profile_shape(self, profile_index: int, binding: object) -> list: ...

    @property
    def has_implicit_batch_dimension(self) -> bool: ...

    @property
    def max_batch_size(self) -> int: ...

    def __len__(self) -> int: ...

    def __getitem__(self, arg: object, /) -> object:
        """engine[i] is tensor i's name, engine[name] its index."""

    def __iter__(self) -> object: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *args) -> bool: ...

class IExecutionContext:
    """Runs an engine: shapes, bound buffers, execute."""

    @property
    def engine(self) -> object: ...

    def set_input_shape(self, name: str, shape: object) -> bool:
        """
        Sets a dynamic input's shape; raises InvalidArgument (naming the input, dim and profile range) when it is outside the profile.
        """

    def get_tensor_shape(self, name: str) -> tuple:
        """An input's shape, or an output's resolved from the input shapes."""

    def set_tensor_address(self, name: str, memory: object) -> bool:
        """
        Binds a C-contiguous numpy array (read or written in place; kept alive while bound) or an int address.
        """

    def execute_v2(self, bindings: object) -> bool:
        """Binds one address or array per tensor (binding order) and runs."""

    def execute_async_v3(self, stream_handle: int = 0) -> bool:
        """Runs with the bound buffers; returns when done (CPU: no streams)."""

    def execute_async_v2(self, bindings: object, stream_handle: int = 0) -> bool: ...

    def infer(self, feed: dict) -> dict:
        """
        Runs on a dict of arrays (shapes taken from them) and returns a dict of every output.
        """

    def set_binding_shape(self, binding: int, shape: object) -> bool: ...

    def get_binding_shape(self, binding: int) -> tuple: ...

    @property
    def all_binding_shapes_specified(self) -> bool: ...

    @property
    def active_optimization_profile(self) -> int: ...

    @active_optimization_profile.setter
    def active_optimization_profile(self, arg: int, /) -> None: ...

    def set_optimization_profile_async(self, profile_index: int, stream_handle: int = 0) -> bool: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *args) -> bool: ...
