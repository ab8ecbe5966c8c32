#!/usr/bin/env python3
"""Fails on an #include that goes up kiln's layers (docs/design.md, "Layers").

Every `#include "<dir>/..."` under src/ is read. A file of one layer may include headers of its
own layer and of the layers below it, and the public API (include/kiln). The example plugins
(src/plugins) may include only the public API and their own headers. The runtime's public header
(include/kiln/engine.h, and every kiln header it includes) may not reach the build-time API
(builder.h, network.h, onnx_parser.h, session.h): a program that only runs plans includes it alone.
Each violation is printed as `FILE:LINE: ...`; the exit status is 1 when there is any.

Usage: scripts/check_layers.py [--root REPO]
"""
import argparse
import pathlib
import re
import sys

# Bottom up; each CMake library kiln_layer_* holds one (CMakeLists.txt).
LAYERS = ["core", "ir", "plugin", "backends/cpu", "engine", "opt", "build", "onnx", "session"]
EXAMPLE_PLUGINS = "plugins"
PUBLIC_API = "kiln"
SOURCE_SUFFIXES = {".h", ".hpp", ".cpp", ".cc"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of(relative: str):
    """The layer of a path relative to src/ ("backends/cpu/kernel.h" -> "backends/cpu"), else None."""
    for layer in sorted(LAYERS, key=len, reverse=True):
        if relative == layer or relative.startswith(layer + "/"):
            return layer
    return None


def chain() -> str:
    return " -> ".join(LAYERS)


def check_file(path: pathlib.Path, src: pathlib.Path, include: pathlib.Path):
    relative = path.relative_to(src).as_posix()
    own = EXAMPLE_PLUGINS if relative.startswith(EXAMPLE_PLUGINS + "/") else layer_of(relative)
    if own is None:
        return []
    problems = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        match = INCLUDE.match(line)
        if not match or "/" not in match.group(1):
            continue
        target = match.group(1)
        if (include / target).is_file() and target.startswith(PUBLIC_API + "/"):
            continue  # the public API, open to every layer
        if not (src / target).exists():
            continue  # not one of kiln's sources (a system or third-party header)
        where = f"src/{relative}:{number}"
        if own == EXAMPLE_PLUGINS:
            if not target.startswith(EXAMPLE_PLUGINS + "/"):
                problems.append(
                    f'{where}: the example plugins (src/plugins) include "{target}" from src/; they may use only '
                    f"the public API (include/kiln) and their own headers")
            continue
        theirs = EXAMPLE_PLUGINS if target.startswith(EXAMPLE_PLUGINS + "/") else layer_of(target)
        if theirs == EXAMPLE_PLUGINS:
            problems.append(f'{where}: layer {own} includes "{target}" from the example plugins (src/plugins), '
                            "which no layer may depend on")
        elif theirs is not None and LAYERS.index(theirs) > LAYERS.index(own):
            problems.append(f'{where}: layer {own} includes "{target}" from layer {theirs}, which is above it '
                            f"(layers, bottom up: {chain()})")
    return problems


RUNTIME_HEADER = "kiln/engine.h"
BUILD_TIME_HEADERS = {"kiln/builder.h", "kiln/network.h", "kiln/onnx_parser.h", "kiln/session.h"}


def check_runtime_header(include: pathlib.Path):
    """Walks the kiln headers include/kiln/engine.h includes (transitively); one problem per
    include of a build-time header on the way."""
    problems, seen, pending = [], {RUNTIME_HEADER}, [RUNTIME_HEADER]
    while pending:
        header = pending.pop()
        path = include / header
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match or not match.group(1).startswith(PUBLIC_API + "/"):
                continue
            target = match.group(1)
            if target in BUILD_TIME_HEADERS:
                problems.append(f'include/{header}:{number}: the runtime header {RUNTIME_HEADER} reaches "{target}", '
                                "part of the build-time API; the runtime must not depend on it")
            elif target not in seen:
                seen.add(target)
                pending.append(target)
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parent.parent,
                        help="the repository to check (default: this one)")
    args = parser.parse_args()
    src, include = args.root / "src", args.root / "include"
    if not src.is_dir():
        print(f"check_layers: {src} is not a directory", file=sys.stderr)
        return 2
    problems = []
    checked = 0
    for path in sorted(src.rglob("*")):
        if path.suffix in SOURCE_SUFFIXES and path.is_file():
            checked += 1
            problems += check_file(path, src, include)
    problems += check_runtime_header(include)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layers: {len(problems)} include(s) against the layers in {checked} files", file=sys.stderr)
        return 1
    print(f"check_layers: {checked} files, every include goes down the layers ({chain()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
