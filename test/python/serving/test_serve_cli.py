"""`sits-runtime serve` as a user runs it: a process that serves until
SIGTERM, then exits 0 after finishing what is in flight; bad options are
refused before anything loads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")
httpx = pytest.importorskip("httpx")

from server_helpers import free_port, wait_healthy  # noqa: E402

CLI = [sys.executable, "-m", "sits_mlir.tools.runtime", "serve"]


def test_bad_options_exit_2(tmp_path):
    for args in (["--max-queue", "0"], ["--port", "70000"], ["--stall-timeout", "0"]):
        r = subprocess.run(CLI + ["--config", str(tmp_path / "none.sitsm"), *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "sits-runtime serve: error" in r.stderr, (args, r.stderr)
    r = subprocess.run(CLI + ["--config", str(tmp_path / "none.sitsm")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "none.sitsm" in r.stderr


@pytest.mark.slow
def test_serve_until_sigterm(served_artifact):
    port = free_port()
    env = {**os.environ, "SITS_API_KEY": "k"}
    proc = subprocess.Popen(CLI + ["--config", served_artifact, "--port", str(port),
                                   "--max-seq-len", "64", "--served-model-name", "tiny",
                                   "--log-level", "warning"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, 60)
        r = httpx.post(url + "/v1/completions", headers={"Authorization": "Bearer k"},
                       json={"model": "tiny", "prompt": "Hello", "max_tokens": 4}, timeout=60)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
