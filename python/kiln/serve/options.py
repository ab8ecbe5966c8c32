"""The server's settings (command-line options of `kiln serve`); a model's config may override
threads and instances."""

from __future__ import annotations

import dataclasses
import pathlib


@dataclasses.dataclass
class ServerOptions:
    threads: int = 0  # intra-op threads of each instance; 0: kiln's default (one per core)
    instances: int = 1  # instances of a model whose config has no instance_group
    max_queue: int = 1024  # queued requests per model version beyond which requests get 503
    max_request_bytes: int = 64 << 20  # larger request bodies get 413
    plan_dir: pathlib.Path | None = None  # prebuilt plans: <plan_dir>/<model>/<version>/model.kiln
