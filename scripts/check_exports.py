#!/usr/bin/env python3
"""Checks what kiln's shared libraries export (docs/design.md, "Exported symbols").

The libraries compile with -fvisibility=hidden; a declaration leaves its library only when it
carries KILN_API (the public API, include/kiln/export.h) or KILN_INTERNAL_API (internal code that
the CLI, the Python module, libkiln_onnx or the tests use, src/core/internal_api.h). Checked:
  1. every class with member functions and every non-inline free function declared at namespace
     scope in include/kiln carries KILN_API (a public function without it would not link);
  2. with --library FILE (repeatable): the library exports no symbol of a third-party namespace
     (protobuf, onnx, CLI11, nlohmann) and none of kiln's build-time layers when it is
     libkiln_runtime (the runtime links and runs a plan without them).
Each violation is printed as one line; the exit status is 1 when there is any.

Usage: scripts/check_exports.py [--root REPO] [--library build/libkiln_runtime.so ...]
"""
import argparse
import pathlib
import re
import subprocess
import sys

NOT_A_DECLARATION = re.compile(
    r"^(inline|template|constexpr|static|using|typedef|namespace|enum|friend|return|#|//|}|\{|"
    r"extern \"C\"|\))")
CLASS = re.compile(r"^(class|struct)(?: \[\[nodiscard\]\])? (KILN_API )?(\w+)\b[^;]*?\{(.*?)^\};",
                   re.M | re.S)
FUNCTION_NAME = re.compile(r"(operator\s*\S+?|\w+)\s*\(")
THIRD_PARTY = ("google::", "onnx::", "CLI::", "nlohmann::")
BUILD_TIME_LAYERS = ("kiln::opt::", "kiln::build::", "kiln::onnx_import::", "kiln::Session::",
                     "kiln::OnnxParser::", "kiln::NetworkDefinition::", "kiln::Builder::")


def header_problems(path: pathlib.Path, shown: str):
    text = path.read_text()
    problems = []
    for match in CLASS.finditer(text):
        kind, exported, name, body = match.groups()
        before = text[:match.start()].rstrip().split("\n")[-1]
        if exported or before.startswith("template"):
            continue
        if "(" not in re.sub(r"//.*", "", body):
            continue  # plain data: nothing to export
        line = text.count("\n", 0, match.start()) + 1
        problems.append(f"{shown}:{line}: {kind} {name} has member functions but no KILN_API")
    lines = text.split("\n")
    # Google style indents everything inside a class, function or enum, so a line that starts in
    # column 0 is at namespace scope.
    for number, line in enumerate(lines, 1):
        code = re.sub(r"//.*", "", line).rstrip()
        if not code or code[0].isspace() or NOT_A_DECLARATION.match(code):
            continue
        if code.startswith(("class", "struct")) or "KILN_API" in code:
            continue
        if number > 1 and lines[number - 2].strip().startswith("template"):
            continue
        name = FUNCTION_NAME.search(code)
        if name:
            problems.append(f"{shown}:{number}: {name.group(1)} is declared without KILN_API")
    return problems


def library_problems(library: pathlib.Path):
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", str(library)], check=True,
                         capture_output=True, text=True).stdout
    problems = []
    runtime = library.name.startswith("libkiln_runtime")
    for line in out.splitlines():
        symbol = line.split(" ", 2)[-1]
        bare = re.sub(r"^(typeinfo name for|typeinfo for|vtable for|VTT for) ", "", symbol)
        if bare.startswith(THIRD_PARTY):
            problems.append(f"{library.name}: exports third-party symbol {symbol}")
        elif runtime and bare.startswith(BUILD_TIME_LAYERS):
            problems.append(f"{library.name}: exports build-time symbol {symbol}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent,
                        type=pathlib.Path)
    parser.add_argument("--library", action="append", default=[], type=pathlib.Path)
    args = parser.parse_args()
    problems = []
    include = args.root / "include" / "kiln"
    for header in sorted(include.glob("*.h")):
        problems += header_problems(header, header.relative_to(args.root).as_posix())
    for library in args.library:
        problems += library_problems(library)
    for problem in problems:
        print(problem)
    checked = f"{len(list(include.glob('*.h')))} public headers, {len(args.library)} libraries"
    if problems:
        print(f"check_exports: {len(problems)} problem(s) in {checked}")
        return 1
    print(f"check_exports: {checked}: every public declaration is exported, nothing else leaks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
