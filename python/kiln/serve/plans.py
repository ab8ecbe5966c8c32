"""Builds a plan (an engine) from an ONNX model for serving: the optimization profile covers batch
sizes 1..max_batch_size on dim 0, the precision comes from the model's config."""

from __future__ import annotations

import pathlib

import kiln

PRECISION_FLAGS = {"fp32": None, "fp16": kiln.BuilderFlag.FP16, "bf16": kiln.BuilderFlag.BF16}


def check_precision(precision: str) -> None:
    if precision not in PRECISION_FLAGS:
        raise ValueError(f"precision '{precision}' is not one of {', '.join(PRECISION_FLAGS)}")


def build_plan(onnx_path: pathlib.Path, *, max_batch_size: int, opt_batch_size: int, precision: str, threads: int) -> bytes:
    """The serialized engine of the model; ValueError naming the file and input when the model
    cannot be built for these settings."""
    check_precision(precision)
    logger = kiln.Logger(kiln.Logger.WARNING)
    builder = kiln.Builder(logger)
    network = builder.create_network(1 << int(kiln.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = kiln.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ValueError(f"{onnx_path}: {errors}")
    config = builder.create_builder_config()
    config.num_threads = threads
    if PRECISION_FLAGS[precision] is not None:
        config.set_flag(PRECISION_FLAGS[precision])
    profile = builder.create_optimization_profile()
    dynamic = False
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        shape = list(tensor.shape)
        if all(d >= 0 for d in shape):
            continue
        if any(d < 0 for d in shape[1:]):
            raise ValueError(f"{onnx_path}: input '{tensor.name}' has shape {shape}: only dim 0 (the batch) may vary in a plan")
        if max_batch_size <= 0:
            raise ValueError(f"{onnx_path}: input '{tensor.name}' has a variable dim 0: a plan needs max_batch_size > 0")
        rest = shape[1:]
        profile.set_shape(tensor.name, [1, *rest], [opt_batch_size, *rest], [max_batch_size, *rest])
        dynamic = True
    if dynamic:
        config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ValueError(f"{onnx_path}: building the plan failed")
    return bytes(plan)
