"""The README's main job runs and the Python API and sits-opt agree on it."""

import subprocess
import sys


def test_demo_runs_on_the_bundled_model():
    out = subprocess.run([sys.executable, "-m", "sits_mlir.demo"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # GELU fused into the first two matmuls; the third has none.
    assert out.stdout.count("activation = #sits.activation<gelu>") == 2
    assert "sits.activation <gelu>" not in out.stdout
    assert "identical output" in out.stdout
