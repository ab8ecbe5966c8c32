"""Execution providers: kiln has one, CPUExecutionProvider; the module-level functions of onnxruntime."""

from __future__ import annotations

import collections.abc
import warnings
from typing import Any, Sequence

from kiln import _kiln

CPU_PROVIDER = "CPUExecutionProvider"


def get_available_providers() -> list[str]:
    """The providers kiln can run on: ["CPUExecutionProvider"]."""
    return [CPU_PROVIDER]


def get_all_providers() -> list[str]:
    """Every provider kiln knows of (the same as get_available_providers)."""
    return [CPU_PROVIDER]


def get_device() -> str:
    """The device kiln runs on: "CPU"."""
    return "CPU"


def get_version_string() -> str:
    """kiln's version (kiln.__version__), where onnxruntime returns its own."""
    return _kiln.__version__


def set_default_logger_severity(severity: int) -> None:
    """Checked (0 verbose ... 4 fatal) and otherwise ignored: kiln logs nothing from Python."""
    if not 0 <= int(severity) <= 4:
        raise _kiln.InvalidArgument(
            f"[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Invalid logging severity level: {severity}; use 0 to 4"
        )


def set_default_logger_verbosity(verbosity: int) -> None:
    """Accepted for compatibility; kiln logs nothing from Python."""


def disable_telemetry_events() -> None:
    """Accepted for compatibility (onnxruntime's switch for its Windows telemetry): kiln sends none."""


def enable_telemetry_events() -> None:
    """Accepted for compatibility: kiln has no telemetry to enable."""


def normalize_providers(
    providers: Sequence[str | tuple[str, dict[Any, Any]]] | None,
    provider_options: Sequence[dict[Any, Any]] | None,
) -> list[str]:
    """The providers a session uses, checked as onnxruntime checks them (ValueError).
    Unavailable providers are skipped with a warning; with none left, or none asked for, the
    session runs on CPUExecutionProvider. Options are checked, not kept: the CPU provider reads
    none (onnxruntime's get_provider_options reports none for it either)."""
    chosen: dict[str, None] = {}

    def choose(name: str, options: dict) -> None:
        if name not in get_available_providers():
            warnings.warn(
                f"Specified provider '{name}' is not in available provider names."
                f"Available providers: '{', '.join(get_available_providers())}'"
            )
            return
        if name in chosen:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.")
            return
        chosen[name] = None

    if providers is not None:
        if not isinstance(providers, collections.abc.Sequence) or isinstance(providers, str):
            raise ValueError("'providers' should be a sequence.")
        if provider_options is not None:
            if not isinstance(provider_options, collections.abc.Sequence):
                raise ValueError("'provider_options' should be a sequence.")
            if len(providers) != len(provider_options):
                raise ValueError("'providers' and 'provider_options' should be the same length if both are given.")
            if not all(isinstance(p, str) for p in providers):
                raise ValueError("Only string values for 'providers' are supported if 'provider_options' is given.")
            if not all(isinstance(o, dict) for o in provider_options):
                raise ValueError("'provider_options' values must be dicts.")
            for name, options in zip(providers, provider_options):
                choose(name, options)
        else:
            for p in providers:
                if isinstance(p, str):
                    choose(p, {})
                elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], dict):
                    choose(p[0], p[1])
                else:
                    raise ValueError("'providers' values must be either strings or (string, dict) tuples.")
    return list(chosen) or [CPU_PROVIDER]


def providers_or_fallback(providers, provider_options, fallback_enabled: bool) -> list[str]:
    """normalize_providers, and as onnxruntime does when that fails and fallback is enabled:
    print the error and use the fallback provider (the CPU)."""
    try:
        return normalize_providers(providers, provider_options)
    except ValueError as e:
        if not fallback_enabled:
            raise
        print("*************** EP Error ***************")
        print(f"EP Error {e} when using {providers}")
        print(f"Falling back to {[CPU_PROVIDER]} and retrying.")
        print("****************************************")
        return [CPU_PROVIDER]
