"""InferenceSession, NodeArg and ModelMetadata: onnxruntime's session API over kiln._kiln.Session."""

from __future__ import annotations

import datetime
import os
import warnings
from typing import Any, Sequence

from kiln import _kiln
from kiln._options import RunOptions, SessionOptions
from kiln._providers import providers_or_fallback


class NodeArg:
    """An input or output of a model: its name, shape (ints, the dim's name for a symbolic dim,
    None for an unknown one) and type ("tensor(float)", "seq(tensor(int64))")."""

    __slots__ = ("name", "shape", "type")

    def __init__(self, name: str, shape: list, type: str) -> None:
        self.name = name
        self.shape = shape
        self.type = type

    def __str__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"

    __repr__ = __str__


class ModelMetadata:
    """What the model says about itself (ModelProto and GraphProto fields)."""

    def __init__(self, fields: dict) -> None:
        self.producer_name: str = fields["producer_name"]
        self.graph_name: str = fields["graph_name"]
        self.graph_description: str = fields["graph_description"]
        self.domain: str = fields["domain"]
        self.description: str = fields["description"]
        self.version: int = fields["version"]
        self.custom_metadata_map: dict[str, str] = fields["custom_metadata_map"]


def check_not_terminated(run_options: RunOptions | None) -> None:
    """Fails as onnxruntime does when run_options asks runs to stop."""
    if run_options is not None and run_options.terminate:
        raise _kiln.Fail("[ONNXRuntimeError] : 1 : FAIL : Exiting due to terminate flag being set to true.")


class InferenceSession:
    """Runs an ONNX model with kiln, with onnxruntime.InferenceSession's API.

    `path_or_bytes` is a model file's path (str or os.PathLike) or its serialized bytes (external
    data is then looked up in the current folder). `providers` names execution providers in
    order of preference, as names or (name, options) tuples; kiln runs on CPUExecutionProvider
    and skips the others with a warning. Keyword arguments onnxruntime takes
    (disabled_optimizers, ...) are accepted and ignored.

    A session made from a path can be pickled (it is loaded again when unpickled); run() may be
    called from several threads at once."""

    def __init__(
        self,
        path_or_bytes: str | bytes | os.PathLike,
        sess_options: SessionOptions | None = None,
        providers: Sequence[str | tuple[str, dict[Any, Any]]] | None = None,
        provider_options: Sequence[dict[Any, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(path_or_bytes, (str, os.PathLike)):
            self._model_path: str | None = os.fspath(path_or_bytes)
            self._model_bytes: bytes | None = None
        elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._model_path = None
            self._model_bytes = bytes(path_or_bytes)
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._providers = providers_or_fallback(providers, provider_options, fallback_enabled=True)
        self._enable_fallback = True
        self._load()
        self._model_bytes = None  # loaded: kiln keeps its own copy of what it needs

    def _load(self) -> None:
        # Again after unpickling in another process, which has not loaded them (a no-op otherwise).
        for library in self._sess_options._custom_ops_libraries:
            _kiln.load_plugin_library(library)
        settings = self._sess_options._kiln_settings()
        if self._sess_options.optimized_model_filepath:
            warnings.warn("kiln does not write the optimized model (SessionOptions.optimized_model_filepath is ignored)")
        if self._model_path is not None:
            self._sess = _kiln.Session(self._model_path, **settings)
        else:
            self._sess = _kiln.Session.from_bytes(self._model_bytes, **settings)
        self._profiling_start = datetime.datetime.now()
        inputs = [(NodeArg(n, s, t), overridable) for n, s, t, overridable in self._sess.inputs()]
        self._inputs_meta = [arg for arg, overridable in inputs if not overridable]
        self._overridable_initializers = [arg for arg, overridable in inputs if overridable]
        self._outputs_meta = [NodeArg(n, s, t) for n, s, t, _ in self._sess.outputs()]
        self._model_meta = ModelMetadata(self._sess.metadata())

    # -- pickling: a session made from a path is loaded again ------------------------------------
    def __getstate__(self) -> dict:
        if self._model_path is None:
            raise TypeError("cannot pickle a kiln InferenceSession made from bytes; make it from a path")
        state = self.__dict__.copy()
        for loaded in ("_sess", "_inputs_meta", "_overridable_initializers", "_outputs_meta", "_model_meta"):
            state.pop(loaded, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._load()

    # -- what the model is ---------------------------------------------------------------------
    def get_session_options(self) -> SessionOptions:
        """The SessionOptions the session was made with."""
        return self._sess_options

    def get_inputs(self) -> list[NodeArg]:
        """The inputs a run must (or, for optional types, may) feed; not the overridable initializers."""
        return self._inputs_meta

    def get_outputs(self) -> list[NodeArg]:
        """The model's outputs, in order."""
        return self._outputs_meta

    def get_overridable_initializers(self) -> list[NodeArg]:
        """Initializers that are also graph inputs: a run may feed them to replace the default."""
        return self._overridable_initializers

    def get_modelmeta(self) -> ModelMetadata:
        """The model's producer, graph name and description, domain, doc string, version and
        metadata_props (custom_metadata_map)."""
        return self._model_meta

    # -- providers -----------------------------------------------------------------------------
    def get_providers(self) -> list[str]:
        """The providers in use: ["CPUExecutionProvider"]."""
        return list(self._providers)

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        """Each provider's options: none for the CPU provider, as in onnxruntime."""
        return {name: {} for name in self._providers}

    def set_providers(self, providers=None, provider_options=None) -> None:
        """Chooses providers again, by the rules of the constructor (the model stays loaded:
        kiln has only the CPU)."""
        self._providers = providers_or_fallback(providers, provider_options, self._enable_fallback)

    def disable_fallback(self) -> None:
        """Bad provider arguments to set_providers then raise instead of falling back to the CPU."""
        self._enable_fallback = False

    def enable_fallback(self) -> None:
        """Bad provider arguments fall back to the CPU provider, with a printed error (the default)."""
        self._enable_fallback = True

    # -- running -------------------------------------------------------------------------------
    def run(self, output_names, input_feed, run_options: RunOptions | None = None) -> list:
        """Runs the model on `input_feed` (input name -> numpy array) and returns the outputs
        named in `output_names` (all when None), in that order: numpy arrays, lists for
        sequences, None for an absent optional. The GIL is released while kiln computes."""
        check_not_terminated(run_options)
        if type(input_feed) is not dict:
            input_feed = dict(input_feed)
        return self._sess.run(output_names, input_feed, run_options._terminate if run_options is not None else None)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options: RunOptions | None = None) -> list:
        """run() with OrtValue inputs and outputs."""
        from kiln._io_binding import OrtValue

        feed = {name: value.numpy() for name, value in input_dict_ort_values.items()}
        return [OrtValue(v) for v in self.run(output_names, feed, run_options)]

    def io_binding(self):
        """An IOBinding for run_with_iobinding."""
        from kiln._io_binding import IOBinding

        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options: RunOptions | None = None) -> None:
        """Runs with the inputs and outputs bound in `iobinding`."""
        if iobinding._session is not self:
            raise ValueError("IOBinding must be used with the session that created it.")
        iobinding._run(run_options)

    # -- profiling -----------------------------------------------------------------------------
    def end_profiling(self) -> str:
        """Writes the layer timings recorded since the session was made (or the last call) as a
        Chrome trace JSON file named after SessionOptions.profile_file_prefix, and returns its
        path; "" when profiling is not enabled."""
        if not self._sess_options.enable_profiling:
            return ""
        trace = self._sess.take_profile(os.getpid())
        stamp = self._profiling_start.strftime("%Y-%m-%d_%H-%M-%S")
        path = f"{self._sess_options.profile_file_prefix}_{stamp}.json"
        with open(path, "w", encoding="utf-8") as f:
            f.write(trace)
        return path

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started (the session's creation), in ns since the epoch."""
        return int(self._profiling_start.timestamp() * 1e9)
