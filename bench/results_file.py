"""bench/results.md as named blocks: run_bench.py writes the latency block, startup.py the start-up block, and
what lies outside the blocks (the title, the history section of earlier runs) is kept as it is.

A block is the lines between `<!-- begin NAME -->` and `<!-- end NAME -->`. A new block goes before the
`## History` heading when there is one, else at the end. The file is replaced atomically (written beside
it, then renamed), so a reader never sees half a report.
"""
import os
import pathlib

TITLE = "# kiln vs ONNX Runtime on the CPU"
HISTORY_HEADING = "## History"


def _markers(name):
    return f"<!-- begin {name} -->", f"<!-- end {name} -->"


def update_block(path, name, lines):
    """Replaces (or adds) block `name` of the Markdown file at `path` with `lines`."""
    path = pathlib.Path(path)
    begin, end = _markers(name)
    old = path.read_text().splitlines() if path.exists() else [TITLE, ""]
    block = [begin, *lines, end]
    if begin in old:
        first = old.index(begin)
        if end not in old[first:]:
            raise ValueError(f"{path}: '{begin}' has no '{end}' after it")
        last = old.index(end, first)
        new = old[:first] + block + old[last + 1:]
    elif HISTORY_HEADING in old:
        at = old.index(HISTORY_HEADING)
        new = old[:at] + block + [""] + old[at:]
    else:
        new = old + ([""] if old and old[-1] else []) + block
    partial = path.with_name(path.name + ".partial")
    partial.write_text("\n".join(new) + "\n")
    os.replace(partial, path)


def read_block(path, name):
    """The lines of block `name` (without its markers), or None when the file or the block is missing."""
    path = pathlib.Path(path)
    if not path.exists():
        return None
    lines = path.read_text().splitlines()
    begin, end = _markers(name)
    if begin not in lines:
        return None
    first = lines.index(begin) + 1
    return lines[first:lines.index(end, first)]
