"""One malformed-input case: how to make its files, the kiln command, and the error it must give."""
import dataclasses
import pathlib
from typing import Callable, Sequence


@dataclasses.dataclass(frozen=True)
class Case:
    """`make(workdir)` writes the case's files into `workdir` (a pathlib.Path) and returns the kiln
    command line after the binary, e.g. ["run", model, "--input", "x=x.npy"]; the case passes when
    kiln exits with `exit_code` and every one of `words` is in its stderr + stdout."""

    name: str
    make: Callable[[pathlib.Path], Sequence]
    exit_code: int
    words: Sequence[str]
    # A known defect not fixed yet: the runner marks the case xfail(strict=True) with this reason.
    xfail: str = ""
