"""Running `sits_mlir.serving.server` in-process for the tests and the load
script: uvicorn in a background thread on a free 127.0.0.1 port."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from typing import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Running:
    """A server in a thread: `url` (…/v1 is the OpenAI base URL), `state`
    (ServerState: its worker, metrics), `server` (uvicorn.Server)."""

    def __init__(self, state, server, thread):
        self.state = state
        self.server = server
        self.thread = thread
        self.url = f"http://127.0.0.1:{state.options.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def snapshot(self) -> dict:
        return dict(self.state.worker.snapshot)

    def wait_idle(self, timeout: float = 10.0) -> dict:
        """Waits until nothing is in flight and no KV block is held; returns
        the last snapshot (the caller asserts on it)."""
        deadline = time.monotonic() + timeout
        while True:
            snap = self.snapshot()
            if (snap["in_flight"] == 0 and snap["kv_blocks_used"] == 0
                    and snap["sequences"] == 0) or time.monotonic() > deadline:
                return snap
            time.sleep(0.01)


@contextlib.contextmanager
def running_server(artifact: str, **options) -> Iterator[Running]:
    """Serves `artifact` (ServeOptions fields as keyword arguments) until the
    block ends; then shuts down as on SIGTERM and checks the engine thread
    ended."""
    from sits_mlir.serving.server import (ServeOptions, ServerState, _uvicorn_server,
                                          create_app)

    options.setdefault("log_level", "warning")
    opts = ServeOptions(config=str(artifact), port=free_port(), **options)
    state = ServerState.load(opts)
    server = _uvicorn_server(state, create_app(state))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            state.close()
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    running = Running(state, server, thread)
    try:
        yield running
    finally:
        state.draining = True
        server.should_exit = True
        thread.join(30)
        state.close()
        assert not thread.is_alive(), "uvicorn did not stop"
        assert not state.worker._thread.is_alive(), "the engine thread did not stop"


def wait_healthy(url: str, proc, timeout: float) -> None:
    """Waits until the server process `proc` answers 200 on `url`/health;
    RuntimeError (with its output, when it exited) if it ends or the
    timeout passes first."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url + "/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}: "
                               f"{proc.communicate() if proc.stdout else ''}")
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not come up")
        time.sleep(0.1)


def metric(text: str, name: str) -> float:
    """A sample's value in Prometheus text (`name` with its labels)."""
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    if m is None:
        raise KeyError(name)
    return float(m.group(1))
