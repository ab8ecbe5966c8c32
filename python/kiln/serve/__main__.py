"""python -m kiln.serve MODEL_REPOSITORY [options]: serves the repository over HTTP with uvicorn.
SIGTERM (or Ctrl-C) stops accepting connections, lets the requests in flight finish, then exits."""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys

from kiln.serve.options import ServerOptions


def parse_args(argv: list[str]) -> argparse.Namespace:
    defaults = ServerOptions()
    p = argparse.ArgumentParser(prog="kiln serve", description="Serve a model repository with the KServe v2 / Triton HTTP protocol.")
    p.add_argument("repository", type=pathlib.Path, help="folder of <model>/<version>/model.onnx|model.kiln (+ <model>/config.pbtxt)")
    p.add_argument("--http-port", type=int, default=8000, help="port of the HTTP/REST API (default 8000)")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0; 127.0.0.1 for this machine only)")
    p.add_argument("--threads", type=int, default=defaults.threads, help="intra-op threads of each model instance (0: one per core)")
    p.add_argument("--instances", type=int, default=defaults.instances, help="instances of a model whose config has no instance_group")
    p.add_argument("--max-request-bytes", type=int, default=defaults.max_request_bytes, help="larger request bodies get 413")
    p.add_argument("--max-queue", type=int, default=defaults.max_queue, help="queued requests per model beyond which requests get 503")
    p.add_argument("--plan-dir", type=pathlib.Path, help="prebuilt plans, <plan-dir>/<model>/<version>/model.kiln, served instead of model.onnx")
    p.add_argument("--drain-timeout", type=float, default=30.0,
                   help="seconds SIGTERM waits for requests in flight before closing their connections (default 30)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = p.parse_args(argv)
    for name in ("threads", "max_request_bytes", "drain_timeout"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0")
    for name in ("instances", "max_queue"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if not args.repository.is_dir():
        p.error(f"model repository {args.repository} is not a folder")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import uvicorn

    from kiln.serve.app import create_app

    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s: %(name)s: %(message)s")
    options = ServerOptions(args.threads, args.instances, args.max_queue, args.max_request_bytes, args.plan_dir)
    app = create_app(args.repository, options)
    uvicorn.run(app, host=args.host, port=args.http_port, log_level=args.log_level, lifespan="on",
                timeout_graceful_shutdown=args.drain_timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
