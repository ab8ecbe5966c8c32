"""Loggers for the TensorRT-style API, as TensorRT's trt.ILogger and trt.Logger.

    logger = kiln.Logger(kiln.Logger.WARNING)

    class Collecting(kiln.ILogger):
        def __init__(self):
            super().__init__()
            self.messages = []
        def log(self, severity, msg):
            self.messages.append((severity, msg))

kiln calls `log` from whichever thread the message comes from (holding the GIL for the call); an
exception it raises is reported as unraisable, never passed into kiln.
"""

from __future__ import annotations

import enum
import sys


class Severity(enum.IntEnum):
    """Message severities; lower is more severe (TensorRT's order)."""

    INTERNAL_ERROR = 0
    ERROR = 1
    WARNING = 2
    INFO = 3
    VERBOSE = 4


class ILogger:
    """The logger interface: subclass it and override `log`."""

    Severity = Severity
    INTERNAL_ERROR = Severity.INTERNAL_ERROR
    ERROR = Severity.ERROR
    WARNING = Severity.WARNING
    INFO = Severity.INFO
    VERBOSE = Severity.VERBOSE

    def log(self, severity: Severity, msg: str) -> None:
        """Receives one message from kiln."""
        raise NotImplementedError

    def __enter__(self) -> "ILogger":
        return self

    def __exit__(self, *exc: object) -> bool:
        return False


class Logger(ILogger):
    """Writes messages at or above `min_severity` to stderr as "[kiln] warning: ..."."""

    def __init__(self, min_severity: Severity = Severity.WARNING) -> None:
        self.min_severity = Severity(min_severity)

    def log(self, severity: Severity, msg: str) -> None:
        """Prints the message when it is at least as severe as min_severity."""
        if severity <= self.min_severity:
            print(f"[kiln] {Severity(severity).name.lower().replace('_', ' ')}: {msg}", file=sys.stderr)
