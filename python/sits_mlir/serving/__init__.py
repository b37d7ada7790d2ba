"""An OpenAI-compatible HTTP server over the generation engine.

    sits-runtime serve --config model.sitsm --host 127.0.0.1 --port 8000

`sits_mlir.serving.server` holds the app (FastAPI + uvicorn, the `serve`
extra): `/v1/completions`, `/v1/chat/completions`, `/v1/models`, `/health`
and `/metrics`, over one engine thread (`EngineWorker`).
"""

from __future__ import annotations

__all__ = ["EngineWorker", "ServeOptions", "ServerState", "create_app", "main", "serve"]


def __getattr__(name: str):
    # The server imports FastAPI and uvicorn (an optional extra): only on use.
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(name)
