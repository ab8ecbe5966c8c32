"""One model version loaded for serving: its config, runner, scheduler and statistics, and the
checks that its config and the model agree."""

from __future__ import annotations

import dataclasses
import pathlib

from kiln.serve.datatypes import config_from_v2, v2_from_config
from kiln.serve.model_config import ModelConfig, data_type_name, data_type_value
from kiln.serve.options import ServerOptions
from kiln.serve.plans import build_plan, check_precision
from kiln.serve.runners import EngineRunner, SessionRunner, is_plan_file
from kiln.serve.scheduler import BatchPolicy, ModelScheduler
from kiln.serve.stats import ModelStats

DEFAULT_FILENAMES = ("model.kiln", "model.onnx")


def model_file(version_dir: pathlib.Path, config) -> pathlib.Path:
    names = (config.default_model_filename,) if config.default_model_filename else DEFAULT_FILENAMES
    for name in names:
        if (version_dir / name).is_file():
            return version_dir / name
    raise FileNotFoundError(f"{version_dir}: no {' or '.join(names)}")


def parameter(config, key: str, default: str) -> str:
    return config.parameters[key].string_value if key in config.parameters else default


def int_parameter(config, key: str, default: int) -> int:
    text = parameter(config, key, str(default))
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"parameter {key} is '{text}', not an integer") from None


def instance_count(config, options: ServerOptions) -> int:
    """Instances from the config's instance_group (CPU kinds only), else the server's --instances."""
    for group in config.instance_group:
        kind = group.DESCRIPTOR.fields_by_name["kind"].enum_type.values_by_number[group.kind].name
        if kind not in ("KIND_AUTO", "KIND_CPU"):
            raise ValueError(f"instance_group kind {kind} is not supported: kiln runs on the CPU (KIND_CPU)")
    counts = [g.count if g.count > 0 else 1 for g in config.instance_group]
    return sum(counts) if counts else options.instances


def make_runner(name: str, version: str, path: pathlib.Path, config, options: ServerOptions, instances: int):
    """A SessionRunner for an ONNX file, an EngineRunner for a plan: a model.kiln file, a plan of
    options.plan_dir, or one built now when the config asks for a precision."""
    threads = int_parameter(config, "threads", options.threads)
    precision = parameter(config, "precision", "fp32")
    check_precision(precision)
    prebuilt = options.plan_dir / name / version / "model.kiln" if options.plan_dir else None
    if prebuilt is not None and prebuilt.is_file():
        return EngineRunner(prebuilt.read_bytes(), instances)
    if is_plan_file(path):
        return EngineRunner(path.read_bytes(), instances)
    if precision != "fp32":
        return EngineRunner(plan_for(path, config, threads), instances)
    return SessionRunner(path, threads)


def plan_for(path: pathlib.Path, config, threads: int) -> bytes:
    """The plan a config asks of an ONNX model (its precision; batch sizes up to max_batch_size)."""
    policy = batch_policy(config)
    return build_plan(
        path,
        max_batch_size=policy.max_batch_size,
        opt_batch_size=policy.target_rows or 1,
        precision=parameter(config, "precision", "fp32"),
        threads=int_parameter(config, "threads", threads),
    )


def batch_policy(config) -> BatchPolicy:
    batching = config.dynamic_batching
    if config.max_batch_size < 0:
        raise ValueError(f"max_batch_size {config.max_batch_size} is negative")
    for size in batching.preferred_batch_size:
        if not 0 < size <= config.max_batch_size:
            raise ValueError(f"preferred_batch_size {size} is not in 1..max_batch_size ({config.max_batch_size})")
    delay = batching.max_queue_delay_microseconds / 1e6 if config.HasField("dynamic_batching") else 0.0
    return BatchPolicy(config.max_batch_size, list(batching.preferred_batch_size), delay)


def check_against_model(config, runner) -> None:
    """Fails (ValueError naming the tensor) when the config's inputs/outputs or max_batch_size do
    not fit the model; fills the config's inputs/outputs from the model when it lists none."""
    batched = config.max_batch_size > 0
    for kind, specs, declared in (("input", runner.inputs, config.input), ("output", runner.outputs, config.output)):
        by_name = {s.name: s for s in specs}
        for d in declared:
            spec = by_name.get(d.name)
            if spec is None:
                raise ValueError(f"config {kind} '{d.name}' is not an {kind} of the model; its {kind}s are {', '.join(by_name)}")
            if d.data_type and v2_from_config(data_type_name(d.data_type)) != spec.datatype:
                raise ValueError(f"config {kind} '{d.name}' is {data_type_name(d.data_type)}, the model's is {config_from_v2(spec.datatype)}")
            model_dims = spec.shape[1:] if batched else spec.shape
            if len(d.dims) != len(model_dims) or any(c != m and -1 not in (c, m) for c, m in zip(d.dims, model_dims)):
                raise ValueError(f"config {kind} '{d.name}' has dims {list(d.dims)}, the model's are {model_dims}")
        for spec in specs:
            if batched and (not spec.shape or spec.shape[0] != -1):
                raise ValueError(
                    f"max_batch_size {config.max_batch_size} needs a variable dim 0 (the batch) in every input and output; "
                    f"{kind} '{spec.name}' has shape {spec.shape}"
                )
        if not declared:
            for spec in specs:
                entry = declared.add(name=spec.name, data_type=data_type_value(config_from_v2(spec.datatype)))
                entry.dims.extend(spec.shape[1:] if batched else spec.shape)
    if batched and isinstance(runner, EngineRunner):
        for spec in runner.inputs:
            low, high = runner.batch_range(spec.name)
            if low > 1 or high < config.max_batch_size:
                raise ValueError(
                    f"the plan's profile allows batch sizes {low}..{high} for input '{spec.name}', "
                    f"max_batch_size is {config.max_batch_size}"
                )


@dataclasses.dataclass
class LoadedModel:
    name: str
    version: str
    config: ModelConfig
    runner: object
    scheduler: ModelScheduler
    stats: ModelStats


def load_version(name: str, version: str, version_dir: pathlib.Path, config, options: ServerOptions):
    """Loads the model (blocking: call it off the event loop); returns what start_version needs."""
    batch_policy(config)  # a bad batching config fails before the model is read
    path = model_file(version_dir, config)
    instances = instance_count(config, options)
    runner = make_runner(name, version, path, config, options, instances)
    check_against_model(config, runner)
    return runner, instances


def start_version(name: str, version: str, config, runner, instances: int, options: ServerOptions) -> LoadedModel:
    """Starts the scheduler of a loaded version (on the event loop)."""
    stats = ModelStats(name, version)
    max_queue = config.dynamic_batching.default_queue_policy.max_queue_size or options.max_queue
    scheduler = ModelScheduler(name, runner, instances, batch_policy(config), max_queue, stats)
    stats.queued = lambda: scheduler.queued
    return LoadedModel(name, version, config, runner, scheduler, stats)
