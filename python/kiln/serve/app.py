"""The KServe v2 REST API over a model repository, as a Starlette (ASGI) application: run by
uvicorn in `kiln serve`, and by Ray Serve's ingress in kiln.serve.ray."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import pathlib
import time

import prometheus_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import kiln
from kiln.serve.errors import ServeError, bad_request
from kiln.serve.model_config import config_to_dict
from kiln.serve.options import ServerOptions
from kiln.serve.protocol import HEADER_LENGTH, decompress_body, encode_response, parse_infer_request
from kiln.serve.repository import ModelRepository
from kiln.serve.scheduler import OverloadedError
from kiln.serve.stats import StatsCollector

log = logging.getLogger("kiln.serve")

# Requests and responses larger than this are decoded and encoded on a worker thread, so that a
# big JSON tensor does not hold up the event loop (and every other client) while it is converted.
OFFLOAD_BYTES = 1 << 18

# What the Session API raises for a bad feed (wrong name, dtype, shape): the client's fault.
REQUEST_ERRORS = (kiln.InvalidArgument, ValueError, TypeError)


def create_app(repository: str | pathlib.Path, options: ServerOptions | None = None) -> Starlette:
    """The v2 API serving every model of the repository folder; models load at startup."""
    options = options or ServerOptions()
    repo = ModelRepository(pathlib.Path(repository), options)
    metrics = prometheus_client.CollectorRegistry()
    metrics.register(StatsCollector(repo.all_stats))
    api = _Api(repo, options, metrics)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await repo.load_all()
        yield
        await repo.close()

    routes = [
        Route("/v2", api.server_metadata),
        Route("/v2/health/live", api.live),
        Route("/v2/health/ready", api.ready),
        Route("/v2/repository/index", api.repository_index, methods=["POST"]),
        Route("/v2/repository/models/{model}/load", api.load, methods=["POST"]),
        Route("/v2/repository/models/{model}/unload", api.unload, methods=["POST"]),
        Route("/v2/models/stats", api.stats),
        Route("/metrics", api.metrics),
    ]
    for prefix in ("/v2/models/{model}", "/v2/models/{model}/versions/{version}"):
        routes += [
            Route(prefix, api.model_metadata),
            Route(prefix + "/ready", api.model_ready),
            Route(prefix + "/config", api.model_config),
            Route(prefix + "/stats", api.stats),
            Route(prefix + "/infer", api.infer, methods=["POST"]),
        ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={ServeError: _error_response, Exception: _internal_error})
    app.state.repository = repo
    return app


async def _error_response(request: Request, e: ServeError) -> JSONResponse:
    return JSONResponse({"error": e.message}, status_code=e.status)


async def _internal_error(request: Request, e: Exception) -> JSONResponse:
    log.exception("%s %s failed", request.method, request.url.path)
    return JSONResponse({"error": f"internal error: {type(e).__name__}: {e}"}, status_code=500)


class _Api:
    def __init__(self, repo: ModelRepository, options: ServerOptions, metrics) -> None:
        self.repo, self.options, self.metrics_registry = repo, options, metrics

    # -- server --------------------------------------------------------------------------------
    async def server_metadata(self, request: Request) -> JSONResponse:
        return JSONResponse(
            {"name": "kiln", "version": kiln.__version__, "extensions": ["binary_tensor_data", "model_repository", "statistics"]}
        )

    async def live(self, request: Request) -> Response:
        return Response(status_code=200)

    async def ready(self, request: Request) -> Response:
        return Response(status_code=200 if self.repo.ready() else 503)

    async def metrics(self, request: Request) -> Response:
        return Response(prometheus_client.generate_latest(self.metrics_registry), media_type=prometheus_client.CONTENT_TYPE_LATEST)

    # -- repository ----------------------------------------------------------------------------
    async def repository_index(self, request: Request) -> JSONResponse:
        body = await self._json_body(request)
        entries = self.repo.index()
        if body.get("ready"):
            entries = [e for e in entries if e["state"] == "READY"]
        return JSONResponse(entries)

    async def load(self, request: Request) -> JSONResponse:
        name = request.path_params["model"]
        if (await self._json_body(request)).get("parameters"):
            raise bad_request("load parameters (a config or files sent with the request) are not supported")
        await self.repo.load(name)
        state, reason = self.repo.state(name)
        if state != "READY":
            raise bad_request(f"failed to load '{name}': {reason}")
        return JSONResponse({})

    async def unload(self, request: Request) -> JSONResponse:
        await self.repo.unload(request.path_params["model"])
        return JSONResponse({})

    async def _json_body(self, request: Request) -> dict:
        body = await self._read_body(request)
        if not body.strip():
            return {}
        try:
            value = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise bad_request(f"the request is not valid JSON: {e}") from None
        if not isinstance(value, dict):
            raise bad_request("the request body is not a JSON object")
        return value

    async def _read_body(self, request: Request) -> bytes:
        """The body, refused with 413 as soon as it is known to exceed max_request_bytes."""
        limit = self.options.max_request_bytes
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise ServeError(413, f"the request body of {length} bytes exceeds the limit of {limit} bytes (max_request_bytes)")
        chunks, total = [], 0
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                raise ServeError(413, f"the request body exceeds the limit of {limit} bytes (max_request_bytes)")
            chunks.append(chunk)
        return b"".join(chunks)

    # -- models --------------------------------------------------------------------------------
    def _model(self, request: Request):
        return self.repo.get(request.path_params["model"], request.path_params.get("version"))

    async def model_metadata(self, request: Request) -> JSONResponse:
        model = self._model(request)
        versions = [model.version] if request.path_params.get("version") else list(self.repo.versions(model.name))
        runner = model.runner
        return JSONResponse(
            {
                "name": model.name,
                "versions": versions,
                "platform": runner.platform,
                "inputs": [{"name": s.name, "datatype": s.datatype, "shape": s.shape} for s in runner.inputs],
                "outputs": [{"name": s.name, "datatype": s.datatype, "shape": s.shape} for s in runner.outputs],
            }
        )

    async def model_ready(self, request: Request) -> Response:
        self._model(request)
        return Response(status_code=200)

    async def model_config(self, request: Request) -> JSONResponse:
        return JSONResponse(config_to_dict(self._model(request).config))

    async def stats(self, request: Request) -> JSONResponse:
        name = request.path_params.get("model")
        if name is None:
            entries = [s.as_dict() for s in self.repo.all_stats()]
        else:
            version = request.path_params.get("version")
            models = [self.repo.get(name, version)] if version else list(self.repo.versions(name).values())
            entries = [m.stats.as_dict() for m in models]
        return JSONResponse({"model_stats": entries})

    async def infer(self, request: Request) -> Response:
        model = self._model(request)
        body = await self._read_body(request)
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        body = await _maybe_offload(len(body), decompress_body, body, encoding, self.options.max_request_bytes)
        start = time.monotonic_ns()
        ok = False
        try:
            infer_request = await _maybe_offload(len(body), parse_infer_request, body, request.headers.get(HEADER_LENGTH))
            rows = _batch_rows(model, infer_request.feed)
            try:
                future = model.scheduler.submit(infer_request.feed, infer_request.output_names, rows)
            except OverloadedError as e:
                raise ServeError(503, str(e)) from None
            try:
                arrays = await future
            except REQUEST_ERRORS as e:
                raise bad_request(str(e)) from None
            except Exception as e:  # the model failed on a valid request
                log.error("model '%s' failed: %s", model.name, e)
                raise ServeError(500, str(e)) from None
            names = infer_request.output_names or [o.name for o in model.runner.outputs]
            size = sum(getattr(a, "nbytes", 0) for a in arrays)
            content, headers = await _maybe_offload(size, encode_response, model.name, model.version, infer_request, names, arrays)
            ok = True
        finally:
            model.stats.record_request(ok, time.monotonic_ns() - start)
        return Response(content, headers=headers)


async def _maybe_offload(size: int, function, *args):
    if size > OFFLOAD_BYTES:
        return await asyncio.to_thread(function, *args)
    return function(*args)


def _batch_rows(model, feed: dict) -> int:
    """The request's batch size (dim 0, the same in every input) for a batching model, else 1."""
    max_batch = model.config.max_batch_size
    if max_batch <= 0:
        return 1
    rows = {name: a.shape[0] if a.ndim else None for name, a in feed.items()}
    if not rows:
        raise bad_request(f"model '{model.name}': the request has no inputs")
    for name, n in rows.items():
        if n is None:
            raise bad_request(f"input '{name}' is a scalar; model '{model.name}' batches along dim 0 (max_batch_size {max_batch})")
    if len(set(rows.values())) > 1:
        raise bad_request(f"the inputs' batch sizes (dim 0) differ: {rows}")
    n = next(iter(rows.values()))
    if not 1 <= n <= max_batch:
        raise bad_request(f"inference request batch size {n} for model '{model.name}' is not in 1..max_batch_size ({max_batch})")
    return n
