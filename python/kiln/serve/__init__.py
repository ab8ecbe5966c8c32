"""kiln.serve: a KServe v2 / Triton-protocol inference server over a model repository.

    python -m kiln.serve MODEL_REPOSITORY --http-port 8000      (or: kiln serve MODEL_REPOSITORY)

    from kiln.serve import create_app, ServerOptions
    app = create_app("models/", ServerOptions(instances=2))      # a Starlette (ASGI) application

kiln.serve.ray deploys the same API on Ray Serve. docs/serving.md describes the repository
layout, the endpoints and the options.
"""

from kiln.serve.app import create_app
from kiln.serve.options import ServerOptions

__all__ = ["ServerOptions", "create_app"]
