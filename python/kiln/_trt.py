"""The TensorRT-style API, with TensorRT's Python names: scripts written for `import tensorrt as trt`
port by replacing `trt.` with `kiln.` (docs/python.md lists the differences).

    logger = kiln.Logger(kiln.Logger.WARNING)
    builder = kiln.Builder(logger)
    network = builder.create_network(1 << int(kiln.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = kiln.OnnxParser(network, logger)
    parser.parse_from_file("model.onnx")
    config = builder.create_builder_config()
    plan = builder.build_serialized_network(network, config)
    engine = kiln.Runtime(logger).deserialize_cuda_engine(plan)
    outputs = engine.create_execution_context().infer({"input": array})
"""

from kiln._calibrator import IInt8Calibrator, IInt8EntropyCalibrator2, IInt8MinMaxCalibrator, IInt8PercentileCalibrator
from kiln._custom_ops import CustomOp, custom_op
from kiln._kiln import (
    ActivationType,
    Builder,
    BuilderFlag,
    CalibrationAlgoType,
    DataType,
    DimExpr,
    ElementWiseOperation,
    ErrorCode,
    IBuilderConfig,
    ICudaEngine,
    IExecutionContext,
    IHostMemory,
    ILayer,
    INetworkDefinition,
    InterpolationMode,
    IOptimizationProfile,
    IPluginCreator,
    IPluginRegistry,
    IPluginV2,
    ITensor,
    MatrixOperation,
    MemoryPoolType,
    NetworkDefinitionCreationFlag,
    OnnxParser,
    ParserError,
    PluginFieldSpec,
    PluginFieldType,
    PoolingType,
    ResizeMode,
    Runtime,
    TensorIOMode,
    get_plugin_registry,
)
from kiln._logger import ILogger, Logger, Severity
from kiln._trt_types import (
    PluginField,
    PluginFieldCollection,
    Weights,
    bfloat16,
    float16,
    float32,
    int8,
    int32,
    int64,
    nptype,
    uint8,
    volume,
)
from kiln._trt_types import bool  # noqa: A004  (TensorRT's kiln.bool)

__all__ = [
    "ActivationType", "Builder", "BuilderFlag", "CalibrationAlgoType", "CustomOp", "DataType", "DimExpr",
    "ElementWiseOperation", "ErrorCode", "IBuilderConfig", "ICudaEngine", "IExecutionContext", "IHostMemory", "IInt8Calibrator", "IInt8EntropyCalibrator2",
    "IInt8MinMaxCalibrator", "IInt8PercentileCalibrator", "ILayer", "ILogger", "INetworkDefinition",
    "IOptimizationProfile", "IPluginCreator", "IPluginRegistry", "IPluginV2", "ITensor", "InterpolationMode", "Logger",
    "MatrixOperation", "MemoryPoolType", "NetworkDefinitionCreationFlag", "OnnxParser", "ParserError", "PluginField",
    "PluginFieldCollection", "PluginFieldSpec", "PluginFieldType", "PoolingType", "ResizeMode", "Runtime", "Severity",
    "TensorIOMode", "Weights", "bfloat16", "bool", "custom_op", "float16", "float32", "get_plugin_registry", "int8",
    "int32", "int64", "nptype", "uint8", "volume",
]
