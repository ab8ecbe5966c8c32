"""SessionOptions, RunOptions and their enums, as onnxruntime spells them."""

from __future__ import annotations

import enum

from kiln import _kiln

# Session config entry: iterations one Loop node may run per run before the run fails (0: no cap).
MAX_LOOP_ITERATIONS_KEY = "kiln.max_loop_iterations"
# Session config entries: intermediate tensors returned as outputs after the model's own
# ("a,b": by name; kiln.mark_all_outputs "1": every node output), like adding them to the graph's
# outputs for onnxruntime. Fusions that would remove a marked tensor are skipped.
EXTRA_OUTPUTS_KEY = "kiln.extra_outputs"
MARK_ALL_OUTPUTS_KEY = "kiln.mark_all_outputs"
# Session config entry: "bf16" computes Conv, MatMul and Gemm in BF16 with FP32 sums where the CPU
# has AVX512_BF16 (kiln::SessionOptions::bf16, docs/precision.md); "fp16" keeps the weights of
# MatMul, Gemm and Linear layers in FP16 (kiln::SessionOptions::fp16); "fp32" (the default) does
# neither.
PRECISION_KEY = "kiln.precision"
# Session config entry: the largest buffer (tensor, activation arena, kernel workspace) the session
# may allocate, in MiB (kiln::SessionOptions::allocationLimitBytes; 0 or absent: the default, 90 % of
# this machine's physical memory); a shape that needs more fails naming the node and output, before anything is allocated.
MEMORY_LIMIT_KEY = "kiln.memory_limit_mb"


class _OrtEnum(enum.IntEnum):
    """An IntEnum that prints as onnxruntime's enums do ("GraphOptimizationLevel.ORT_ENABLE_ALL")."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class GraphOptimizationLevel(_OrtEnum):
    """How much kiln optimizes the graph.

    ORT_DISABLE_ALL runs the graph as written; ORT_ENABLE_BASIC and ORT_ENABLE_EXTENDED fold
    constants, remove dead nodes and fuse layers keeping every tensor NCHW; ORT_ENABLE_LAYOUT and
    ORT_ENABLE_ALL also run convolutions in kiln's blocked NCHWc layout (the default)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(_OrtEnum):
    """Accepted for compatibility: kiln runs nodes in order, each on the intra-op threads."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(_OrtEnum):
    """Accepted for compatibility: kiln always runs nodes in topological order."""

    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class SessionOptions:
    """Options of an InferenceSession (onnxruntime.SessionOptions).

    Used by kiln: intra_op_num_threads (0 = one thread per core), graph_optimization_level,
    enable_profiling and profile_file_prefix, register_custom_ops_library. Accepted and kept but
    without effect on kiln (see docs/python.md): inter_op_num_threads, execution_mode,
    execution_order, log_severity_level, log_verbosity_level, logid, enable_cpu_mem_arena,
    enable_mem_pattern, enable_mem_reuse, use_deterministic_compute (kiln's results do not
    depend on thread count), session config entries other than kiln's (kiln.max_loop_iterations,
    kiln.extra_outputs, kiln.mark_all_outputs, kiln.precision, kiln.memory_limit_mb). optimized_model_filepath is accepted, and a
    warning says that kiln does not write the optimized model."""

    def __init__(self) -> None:
        self.intra_op_num_threads: int = 0
        self.inter_op_num_threads: int = 0
        self.graph_optimization_level: GraphOptimizationLevel = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode: ExecutionMode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order: ExecutionOrder = ExecutionOrder.DEFAULT
        self.log_severity_level: int = -1
        self.log_verbosity_level: int = 0
        self.logid: str = ""
        self.enable_cpu_mem_arena: bool = True
        self.enable_mem_pattern: bool = True
        self.enable_mem_reuse: bool = True
        self.enable_profiling: bool = False
        self.profile_file_prefix: str = "onnxruntime_profile_"
        self.optimized_model_filepath: str = ""
        self.use_deterministic_compute: bool = False
        self._config_entries: dict[str, str] = {}
        self._custom_ops_libraries: list[str] = []

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Stores a session config entry (kiln reads kiln.max_loop_iterations, kiln.extra_outputs,
        kiln.mark_all_outputs, kiln.precision and kiln.memory_limit_mb, none of onnxruntime's)."""
        self._config_entries[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        """The value stored for `key`; raises Fail when there is none, as onnxruntime does."""
        if key not in self._config_entries:
            raise _kiln.Fail(f"[ONNXRuntimeError] : 1 : FAIL : SessionOptions does not have configuration with key: {key}")
        return self._config_entries[key]

    def register_custom_ops_library(self, library_path: str) -> None:
        """Loads a kiln plugin library (.so, see docs/plugins.md) now; its plugins then serve
        the ops they name in every session."""
        _kiln.load_plugin_library(str(library_path))
        self._custom_ops_libraries.append(str(library_path))

    def _kiln_settings(self) -> dict:
        """The kiln::SessionOptions these options mean (arguments of _kiln.Session)."""
        level = GraphOptimizationLevel(self.graph_optimization_level)
        threads = int(self.intra_op_num_threads)
        if threads < 0:
            raise _kiln.InvalidArgument(
                f"[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : intra_op_num_threads must be >= 0 (got {threads})"
            )
        return {
            "threads": threads,
            "optimize": level != GraphOptimizationLevel.ORT_DISABLE_ALL,
            "nchwc_layout": level >= GraphOptimizationLevel.ORT_ENABLE_LAYOUT,
            "profile": bool(self.enable_profiling),
            "max_loop_iterations": self._non_negative_entry(MAX_LOOP_ITERATIONS_KEY),
            "allocation_limit_bytes": self._non_negative_entry(MEMORY_LIMIT_KEY) << 20,
            "extra_outputs": self._extra_outputs(),
            "mark_all_outputs": self._mark_all_outputs(),
            "bf16": self._precision() == "bf16",
            "fp16": self._precision() == "fp16",
        }

    def _precision(self) -> str:
        """The session config entry kiln.precision: "fp32" (the default), "bf16" or "fp16"."""
        text = self._config_entries.get(PRECISION_KEY, "fp32")
        if text not in ("fp32", "bf16", "fp16"):
            raise _kiln.InvalidArgument(
                f"[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : {PRECISION_KEY} must be fp32, bf16 or fp16 (got {text!r})"
            )
        return text

    def _extra_outputs(self) -> list[str]:
        """The names in the session config entry kiln.extra_outputs (comma-separated)."""
        text = self._config_entries.get(EXTRA_OUTPUTS_KEY, "")
        return [name.strip() for name in text.split(",") if name.strip()]

    def _mark_all_outputs(self) -> bool:
        """The session config entry kiln.mark_all_outputs: "1" (or "0", the default)."""
        text = self._config_entries.get(MARK_ALL_OUTPUTS_KEY, "0")
        if text not in ("0", "1"):
            raise _kiln.InvalidArgument(
                f"[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : {MARK_ALL_OUTPUTS_KEY} must be 0 or 1 (got {text!r})"
            )
        return text == "1"

    def _non_negative_entry(self, key: str) -> int:
        """An integer session config entry >= 0 (kiln.max_loop_iterations: iterations one Loop node
        may run per run, 0: no cap; kiln.memory_limit_mb, 0: the default limit); 0 when absent."""
        text = self._config_entries.get(key, "0")
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0:
            raise _kiln.InvalidArgument(
                f"[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : {key} must be an integer >= 0 (got {text!r})"
            )
        return value


class RunOptions:
    """Options of one run (onnxruntime.RunOptions). kiln honours `terminate`: a run started with it
    set fails at once, as in onnxruntime, and setting it from another thread stops the runs using
    these options before their next layer or loop iteration. The logging fields and config
    entries are kept, unused."""

    def __init__(self) -> None:
        self.log_severity_level: int = -1
        self.log_verbosity_level: int = 0
        self.logid: str = ""
        self._terminate = _kiln.RunFlag()
        self.only_execute_path_to_fetches: bool = False
        self._config_entries: dict[str, str] = {}

    @property
    def terminate(self) -> bool:
        return self._terminate.value

    @terminate.setter
    def terminate(self, value: bool) -> None:
        self._terminate.value = bool(value)

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Stores a run config entry (kiln reads none of them)."""
        self._config_entries[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        """The value stored for `key`; raises Fail when there is none."""
        if key not in self._config_entries:
            raise _kiln.Fail(f"[ONNXRuntimeError] : 1 : FAIL : RunOptions does not have configuration with key: {key}")
        return self._config_entries[key]
