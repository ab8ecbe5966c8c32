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
import pathlib

from ray import serve

from kiln.serve.app import create_app
from kiln.serve.options import ServerOptions
from kiln.serve.repository_plans import build_plans

__all__ = ["KilnDeployment", "app", "build_plans"]


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
