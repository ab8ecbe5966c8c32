"""KServe v2 infer requests and responses: JSON tensors, and the binary tensor data extension
(a JSON header of Inference-Header-Content-Length bytes, then each binary tensor's bytes in the
order of the header's tensors, as tritonclient sends and reads them)."""

from __future__ import annotations

import dataclasses
import json
import math
import struct
import zlib

import numpy as np

from kiln.serve.datatypes import numpy_dtype, v2_from_numpy
from kiln.serve.errors import ServeError, bad_request

HEADER_LENGTH = "Inference-Header-Content-Length"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}  # what tritonclient's request compression sends


@dataclasses.dataclass
class InferRequest:
    id: str | None
    feed: dict[str, np.ndarray]
    output_names: list[str] | None  # None: every output of the model
    binary_outputs: dict[str, bool]  # per requested output
    binary_default: bool  # the request's binary_data_output parameter


def decompress_body(body: bytes, encoding: str, limit: int) -> bytes:
    """The body of a request sent with Content-Encoding gzip or deflate, refused (413) once it
    inflates past `limit` bytes."""
    if encoding == "identity":
        return body
    if encoding not in _WBITS:
        raise bad_request(f"Content-Encoding '{encoding}' is not supported (gzip, deflate or none)")
    inflater = zlib.decompressobj(_WBITS[encoding])
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as e:
        raise bad_request(f"the {encoding} request body cannot be decompressed: {e}") from None
    if len(data) > limit:
        raise ServeError(413, f"the decompressed request body exceeds the limit of {limit} bytes (max_request_bytes)")
    return data


def parse_infer_request(body: bytes, header_length: str | None) -> InferRequest:
    """The request's tensors as numpy arrays; ServeError 400 naming the tensor when the request is
    malformed."""
    header, binary = _split_body(body, header_length)
    try:
        request = json.loads(header)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad_request(f"the request is not valid JSON: {e}") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise bad_request("the request has no 'inputs' list")
    feed: dict[str, np.ndarray] = {}
    offset = 0
    for tensor in request["inputs"]:
        name, array, offset = _read_input(tensor, binary, offset)
        if name in feed:
            raise bad_request(f"input '{name}' is given twice")
        feed[name] = array
    if offset != len(binary):
        raise bad_request(f"{len(binary) - offset} bytes of binary data follow the last binary tensor")
    params = _parameters(request, "the request")
    output_names, binary_outputs = None, {}
    if request.get("outputs") is not None:
        if not isinstance(request["outputs"], list):
            raise bad_request("'outputs' is not a list")
        output_names = []
        for output in request["outputs"]:
            if not isinstance(output, dict) or not isinstance(output.get("name"), str):
                raise bad_request("a requested output has no 'name'")
            output_params = _parameters(output, f"output '{output['name']}'")
            if output_params.get("classification"):
                raise bad_request(f"output '{output['name']}': the classification extension is not supported")
            output_names.append(output["name"])
            if "binary_data" in output_params:
                binary_outputs[output["name"]] = bool(output_params["binary_data"])
    request_id = request.get("id")
    return InferRequest(
        str(request_id) if request_id is not None else None,
        feed,
        output_names,
        binary_outputs,
        bool(params.get("binary_data_output", False)),
    )


def _split_body(body: bytes, header_length: str | None) -> tuple[bytes, bytes]:
    if header_length is None:
        return body, b""
    try:
        n = int(header_length)
    except ValueError:
        n = -1
    if not 0 <= n <= len(body):
        raise bad_request(f"{HEADER_LENGTH} is '{header_length}', the body has {len(body)} bytes")
    return body[:n], body[n:]


def _parameters(obj: dict, what: str) -> dict:
    params = obj.get("parameters", {})
    if not isinstance(params, dict):
        raise bad_request(f"{what}: 'parameters' is not an object")
    return params


def _read_input(tensor, binary: bytes, offset: int) -> tuple[str, np.ndarray, int]:
    if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
        raise bad_request("an input has no 'name'")
    name = tensor["name"]
    shape = tensor.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise bad_request(f"input '{name}': 'shape' {shape!r} is not a list of dims >= 0")
    try:
        dtype = numpy_dtype(tensor.get("datatype"))
    except ValueError as e:
        raise bad_request(f"input '{name}': {e}") from None
    count = math.prod(shape)
    size = _parameters(tensor, f"input '{name}'").get("binary_data_size")
    if size is not None:
        if not isinstance(size, int) or size < 0 or offset + size > len(binary):
            raise bad_request(f"input '{name}': binary_data_size {size!r} runs past the {len(binary)} bytes of binary data")
        chunk = binary[offset : offset + size]
        array = _decode_bytes(name, chunk, count) if dtype == object else _decode_binary(name, chunk, dtype, count, shape)
        return name, array.reshape(shape), offset + size
    if "data" not in tensor:
        raise bad_request(f"input '{name}' has neither 'data' nor a binary_data_size parameter")
    return name, _decode_json(name, tensor["data"], dtype, count, shape), offset


def _decode_binary(name: str, chunk: bytes, dtype: np.dtype, count: int, shape: list[int]) -> np.ndarray:
    if len(chunk) != count * dtype.itemsize:
        raise bad_request(
            f"input '{name}': {len(chunk)} bytes of binary data, shape {shape} of {v2_from_numpy(dtype)} needs {count * dtype.itemsize}"
        )
    return np.frombuffer(chunk, dtype=dtype)


def _decode_bytes(name: str, chunk: bytes, count: int) -> np.ndarray:
    """BYTES elements: each a 4-byte little-endian length and that many bytes."""
    items, pos = [], 0
    while pos < len(chunk):
        if pos + 4 > len(chunk):
            raise bad_request(f"input '{name}': a BYTES element's length is cut off")
        (n,) = struct.unpack_from("<I", chunk, pos)
        if pos + 4 + n > len(chunk):
            raise bad_request(f"input '{name}': a BYTES element of {n} bytes runs past the tensor's data")
        items.append(chunk[pos + 4 : pos + 4 + n])
        pos += 4 + n
    if len(items) != count:
        raise bad_request(f"input '{name}': {len(items)} BYTES elements, the shape holds {count}")
    return np.array(items, dtype=object)


def _decode_json(name: str, data, dtype: np.dtype, count: int, shape: list[int]) -> np.ndarray:
    try:
        flat = np.asarray(data, dtype=dtype).ravel() if dtype != object else np.array(_flatten(data), dtype=object)
    except (TypeError, ValueError, OverflowError) as e:
        raise bad_request(f"input '{name}': its data is not {v2_from_numpy(dtype)} values: {e}") from None
    if flat.size != count:
        raise bad_request(f"input '{name}': {flat.size} values, shape {shape} holds {count}")
    return flat.reshape(shape)


def _flatten(data) -> list:
    if isinstance(data, list):
        return [x for item in data for x in _flatten(item)]
    return [data]


def encode_response(model_name: str, version: str, request: InferRequest, names: list[str], arrays: list) -> tuple[bytes, dict]:
    """The response body and its headers: JSON, with the outputs asked for in binary after it."""
    outputs, chunks = [], []
    for name, array in zip(names, arrays):
        array = np.asarray(array)
        entry = {"name": name, "datatype": v2_from_numpy(array.dtype), "shape": list(array.shape)}
        if request.binary_outputs.get(name, request.binary_default):
            chunk = _encode_binary(array)
            entry["parameters"] = {"binary_data_size": len(chunk)}
            chunks.append(chunk)
        else:
            entry["data"] = _json_values(array)
        outputs.append(entry)
    response = {"model_name": model_name, "model_version": version, "outputs": outputs}
    if request.id is not None:
        response["id"] = request.id
    header = json.dumps(response, separators=(",", ":")).encode()
    if not chunks:
        return header, {"content-type": "application/json"}
    headers = {"content-type": "application/octet-stream", HEADER_LENGTH: str(len(header))}
    return header + b"".join(chunks), headers


def _encode_binary(array: np.ndarray) -> bytes:
    if array.dtype == object or array.dtype.kind in "US":
        parts = []
        for item in array.ravel():
            raw = item if isinstance(item, bytes) else str(item).encode()
            parts.append(struct.pack("<I", len(raw)) + raw)
        return b"".join(parts)
    return np.ascontiguousarray(array).tobytes()


def _json_values(array: np.ndarray) -> list:
    if array.dtype == object or array.dtype.kind in "US":
        return [item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item) for item in array.ravel()]
    if v2_from_numpy(array.dtype) == "BF16":
        array = array.astype(np.float32)
    return array.ravel().tolist()
