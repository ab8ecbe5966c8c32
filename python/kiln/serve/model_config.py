"""A model's config.pbtxt / config.json: the subset of Triton's ModelConfig message that kiln uses.

The message is defined here with protobuf's descriptor API (no generated code, so no protoc and no
generated-code/runtime version pairing), with Triton's field names and numbers; protobuf's own
text_format and json_format then read the two files exactly as Triton writes them. Fields of
Triton's schema that kiln does not use (optimization, backend settings, ...) are skipped with a
warning that names the first of them."""

from __future__ import annotations

import logging
import pathlib

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory, text_format

log = logging.getLogger("kiln.serve")

_F = descriptor_pb2.FieldDescriptorProto
_DATA_TYPES = [
    "TYPE_INVALID", "TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64", "TYPE_INT8",
    "TYPE_INT16", "TYPE_INT32", "TYPE_INT64", "TYPE_FP16", "TYPE_FP32", "TYPE_FP64", "TYPE_STRING", "TYPE_BF16",
]


def _field(message, name, number, kind, *, repeated=False, type_name=None, oneof=None):
    field = message.field.add(name=name, number=number, type=kind)
    field.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if type_name:
        field.type_name = type_name
    if oneof is not None:
        field.oneof_index = oneof


def _enum(parent, name, values):
    enum = parent.enum_type.add(name=name)
    for number, value in enumerate(values):
        enum.value.add(name=value, number=number)


def _schema() -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name="kiln/serve/model_config.proto", package="kiln.serve", syntax="proto3")
    _enum(f, "DataType", _DATA_TYPES)

    latest = f.message_type.add(name="Latest")
    _field(latest, "num_versions", 1, _F.TYPE_UINT32)
    f.message_type.add(name="All")
    specific = f.message_type.add(name="Specific")
    _field(specific, "versions", 1, _F.TYPE_INT64, repeated=True)
    policy = f.message_type.add(name="ModelVersionPolicy")
    policy.oneof_decl.add(name="policy_choice")
    _field(policy, "latest", 1, _F.TYPE_MESSAGE, type_name=".kiln.serve.Latest", oneof=0)
    _field(policy, "all", 2, _F.TYPE_MESSAGE, type_name=".kiln.serve.All", oneof=0)
    _field(policy, "specific", 3, _F.TYPE_MESSAGE, type_name=".kiln.serve.Specific", oneof=0)

    model_input = f.message_type.add(name="ModelInput")
    _enum(model_input, "Format", ["FORMAT_NONE", "FORMAT_NHWC", "FORMAT_NCHW"])
    _field(model_input, "name", 1, _F.TYPE_STRING)
    _field(model_input, "data_type", 2, _F.TYPE_ENUM, type_name=".kiln.serve.DataType")
    _field(model_input, "format", 3, _F.TYPE_ENUM, type_name=".kiln.serve.ModelInput.Format")
    _field(model_input, "dims", 4, _F.TYPE_INT64, repeated=True)
    _field(model_input, "optional", 8, _F.TYPE_BOOL)
    model_output = f.message_type.add(name="ModelOutput")
    _field(model_output, "name", 1, _F.TYPE_STRING)
    _field(model_output, "data_type", 2, _F.TYPE_ENUM, type_name=".kiln.serve.DataType")
    _field(model_output, "dims", 3, _F.TYPE_INT64, repeated=True)

    group = f.message_type.add(name="ModelInstanceGroup")
    _enum(group, "Kind", ["KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"])
    _field(group, "name", 1, _F.TYPE_STRING)
    _field(group, "count", 2, _F.TYPE_INT32)
    _field(group, "kind", 4, _F.TYPE_ENUM, type_name=".kiln.serve.ModelInstanceGroup.Kind")

    queue_policy = f.message_type.add(name="ModelQueuePolicy")
    _field(queue_policy, "max_queue_size", 4, _F.TYPE_UINT32)
    batching = f.message_type.add(name="ModelDynamicBatching")
    _field(batching, "preferred_batch_size", 1, _F.TYPE_INT32, repeated=True)
    _field(batching, "max_queue_delay_microseconds", 2, _F.TYPE_UINT64)
    _field(batching, "preserve_ordering", 3, _F.TYPE_BOOL)
    _field(batching, "default_queue_policy", 5, _F.TYPE_MESSAGE, type_name=".kiln.serve.ModelQueuePolicy")

    parameter = f.message_type.add(name="ModelParameter")
    _field(parameter, "string_value", 1, _F.TYPE_STRING)

    config = f.message_type.add(name="ModelConfig")
    entry = config.nested_type.add(name="ParametersEntry")
    entry.options.map_entry = True
    _field(entry, "key", 1, _F.TYPE_STRING)
    _field(entry, "value", 2, _F.TYPE_MESSAGE, type_name=".kiln.serve.ModelParameter")
    _field(config, "name", 1, _F.TYPE_STRING)
    _field(config, "platform", 2, _F.TYPE_STRING)
    _field(config, "version_policy", 3, _F.TYPE_MESSAGE, type_name=".kiln.serve.ModelVersionPolicy")
    _field(config, "max_batch_size", 4, _F.TYPE_INT32)
    _field(config, "input", 5, _F.TYPE_MESSAGE, repeated=True, type_name=".kiln.serve.ModelInput")
    _field(config, "output", 6, _F.TYPE_MESSAGE, repeated=True, type_name=".kiln.serve.ModelOutput")
    _field(config, "instance_group", 7, _F.TYPE_MESSAGE, repeated=True, type_name=".kiln.serve.ModelInstanceGroup")
    _field(config, "default_model_filename", 8, _F.TYPE_STRING)
    _field(config, "dynamic_batching", 11, _F.TYPE_MESSAGE, type_name=".kiln.serve.ModelDynamicBatching")
    _field(config, "parameters", 14, _F.TYPE_MESSAGE, repeated=True, type_name=".kiln.serve.ModelConfig.ParametersEntry")
    _field(config, "backend", 17, _F.TYPE_STRING)
    return f


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_schema())
ModelConfig = message_factory.GetMessageClass(_pool.FindMessageTypeByName("kiln.serve.ModelConfig"))


class ConfigError(ValueError):
    """A config file that cannot be read; the message names the file and what is wrong."""


def read_model_config(model_dir: pathlib.Path):
    """The ModelConfig of a model folder from config.pbtxt or config.json (an empty one when there
    is neither; both at once is an error)."""
    pbtxt, js = model_dir / "config.pbtxt", model_dir / "config.json"
    if pbtxt.is_file() and js.is_file():
        raise ConfigError(f"{model_dir}: both config.pbtxt and config.json are present; keep one")
    config = ModelConfig()
    if pbtxt.is_file():
        _parse_text(pbtxt, config)
    elif js.is_file():
        _parse_json(js, config)
    return config


def _parse_text(path: pathlib.Path, config) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        text_format.Parse(text, config)
        return
    except text_format.ParseError as strict_error:
        config.Clear()
        try:
            text_format.Parse(text, config, allow_unknown_field=True)
        except text_format.ParseError as e:
            raise ConfigError(f"{path}: {e}") from None
        log.warning("%s: %s; kiln does not use such fields and ignores them", path, strict_error)


def _parse_json(path: pathlib.Path, config) -> None:
    try:
        json_format.Parse(path.read_text(encoding="utf-8"), config, ignore_unknown_fields=True)
    except json_format.ParseError as e:
        raise ConfigError(f"{path}: {e}") from None


def config_to_dict(config) -> dict:
    """The config as Triton's JSON form (what GET .../config returns)."""
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


def data_type_name(value: int) -> str:
    """The ModelConfig DataType enum's name for a value ("TYPE_FP32")."""
    return _DATA_TYPES[value]


def data_type_value(name: str) -> int:
    return _DATA_TYPES.index(name)
