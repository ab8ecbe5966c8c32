"""kiln's compiled bindings; use the kiln package, which wraps them."""

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

class Session:
    """A loaded model (kiln::Session); kiln.InferenceSession wraps it."""

    def __init__(self, path: str, threads: int = 0, optimize: bool = True, nchwc_layout: bool = True, profile: bool = False) -> None:
        """Loads and prepares the model file at `path`."""

    @staticmethod
    def from_bytes(data: bytes, threads: int = 0, optimize: bool = True, nchwc_layout: bool = True, profile: bool = False, external_data_dir: str = '') -> Session:
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

    def run(self, output_names: object | None, input_feed: dict) -> list:
        """
        Runs the model with the GIL released; returns the named outputs (all when None) in order.
        """

    def take_profile(self) -> list:
        """The trace events recorded since the last call (profile=True)."""

def load_plugin_library(path: str) -> None:
    """
    Loads a kiln plugin library (.so); its plugins then serve the ops they name.
    """
