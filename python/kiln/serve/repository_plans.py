"""Plans for a whole repository, built once: what `kiln serve --plan-dir` and the replicas of
kiln.serve.ray load instead of building their own from model.onnx."""

from __future__ import annotations

import logging
import pathlib

from kiln.serve.loaded_model import model_file, plan_for
from kiln.serve.model_config import read_model_config
from kiln.serve.repository import select_versions
from kiln.serve.runners import is_plan_file

log = logging.getLogger("kiln.serve")


def build_plans(repository: str | pathlib.Path, plan_dir: str | pathlib.Path, threads: int = 0) -> dict[str, str]:
    """Builds <plan_dir>/<model>/<version>/model.kiln for each ONNX model version the repository
    serves (with its config's batch sizes and precision). Returns {"model/version": "built" or the
    reason it stays ONNX}."""
    repository, plan_dir = pathlib.Path(repository), pathlib.Path(plan_dir)
    outcome = {}
    for model_dir in sorted(p for p in repository.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            config = read_model_config(model_dir)
            versions = select_versions(model_dir, config)
        except Exception as e:  # the replicas report it in their repository index
            outcome[model_dir.name] = f"not built: {e}"
            continue
        for version in versions:
            key = f"{model_dir.name}/{version}"
            try:
                source = model_file(model_dir / version, config)
                if is_plan_file(source):
                    outcome[key] = "a plan already"
                    continue
                plan = plan_for(source, config, threads)
            except Exception as e:
                outcome[key] = f"not built: {e}"
                log.warning("%s stays ONNX: %s", key, e)
                continue
            target = plan_dir / model_dir.name / version / "model.kiln"
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".kiln.partial")
            partial.write_bytes(plan)
            partial.replace(target)  # replicas never see half a file
            outcome[key] = "built"
    return outcome
