"""kiln.serve on Ray Serve: the same KServe v2 HTTP API, through Ray Serve's ingress, with the
replicas spread over a Ray cluster.

    from ray import serve
    import kiln.serve.ray

    app = kiln.serve.ray.app("/shared/models", plan_dir="/shared/plans", num_replicas=2)
    serve.run(app, route_prefix="/")

app() builds a plan for each ONNX model once, on the caller's machine, and every replica loads
that plan file (<plan_dir>/<model>/<version>/model.kiln) instead of building its own; models that
cannot become a plan (a varying dim other than the batch) are loaded from ONNX by each replica.
KilnDeployment is the deployment class itself, for serve.run(KilnDeployment.options(...).bind(...)).
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib

from ray import serve

from kiln.serve.app import create_app
from kiln.serve.loaded_model import model_file, plan_for
from kiln.serve.model_config import read_model_config
from kiln.serve.options import ServerOptions
from kiln.serve.repository import select_versions
from kiln.serve.runners import is_plan_file

log = logging.getLogger("kiln.serve")


@serve.deployment
@serve.ingress()
class KilnDeployment:
    """One replica: the repository's models loaded (plans from plan_dir when there), served by
    the v2 API. `options` holds ServerOptions fields (threads, instances, max_queue, ...)."""

    def __init__(self, repository: str, options: dict | None = None) -> None:
        fields = dict(options or {})
        if fields.get("plan_dir") is not None:
            fields["plan_dir"] = pathlib.Path(fields["plan_dir"])
        self._app = create_app(repository, ServerOptions(**fields))

    def __serve_build_asgi_app__(self):
        return self._app


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


def app(
    repository: str | pathlib.Path,
    *,
    plan_dir: str | pathlib.Path | None = None,
    num_replicas: int | str | None = None,
    autoscaling_config: dict | None = None,
    ray_actor_options: dict | None = None,
    **server_options,
):
    """The bound application for serve.run: plans built once into plan_dir (when given), then
    KilnDeployment with the Ray Serve options passed through (num_replicas, autoscaling_config,
    ray_actor_options; None leaves Ray's default) and ServerOptions fields as keywords."""
    options = dataclasses.asdict(ServerOptions(**server_options))
    if plan_dir is not None:
        build_plans(repository, plan_dir, options["threads"])
        options["plan_dir"] = str(pathlib.Path(plan_dir).resolve())
    deployment_options = {
        k: v
        for k, v in {"num_replicas": num_replicas, "autoscaling_config": autoscaling_config, "ray_actor_options": ray_actor_options}.items()
        if v is not None
    }
    return KilnDeployment.options(**deployment_options).bind(str(pathlib.Path(repository).resolve()), options)
