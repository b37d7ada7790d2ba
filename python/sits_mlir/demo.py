"""The main job on the bundled default model.

Runs the SITS graph pipeline over the bundled MLP twice, in process through
``sits_mlir.passmanager`` and through the ``sits-opt`` tool, checks that both
give the same IR, and prints it with pass timing.

    python -m sits_mlir.demo [--model PATH] [--pipeline PIPELINE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from importlib import resources

from . import ir, passmanager

DEFAULT_PIPELINE = "builtin.module(func.func(sits-fuse-epilogue),canonicalize,cse)"


def bundled_model() -> str:
    return str(resources.files("sits_mlir") / "examples" / "mlp.mlir")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sits_mlir.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=bundled_model(), help="an .mlir file (default: the bundled MLP)")
    parser.add_argument("--pipeline", default=DEFAULT_PIPELINE)
    args = parser.parse_args(argv)

    with open(args.model) as f:
        source = f.read()

    with ir.Context():
        module = ir.Module.parse(source)
        pm = passmanager.PassManager.parse(args.pipeline)
        start = time.perf_counter()
        pm.run(module.operation)
        in_process_ms = (time.perf_counter() - start) * 1e3
        result = str(module)

    # Installed next to this interpreter (a venv's bin/) or on PATH.
    search = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    sits_opt = shutil.which("sits-opt", path=search)
    if sits_opt is None:
        print("error: sits-opt is not on PATH", file=sys.stderr)
        return 1
    command = [sits_opt, args.model, f"--pass-pipeline={args.pipeline}"]
    start = time.perf_counter()
    tool = subprocess.run(command, check=True, capture_output=True, text=True)
    tool_ms = (time.perf_counter() - start) * 1e3
    if tool.stdout.strip() != result.strip():
        print("error: sits-opt and the Python API disagree", file=sys.stderr)
        return 1

    print(result)
    print(f"// pipeline: {args.pipeline}")
    print(f"// python API: {in_process_ms:.2f} ms (passes only)")
    print(f"// sits-opt:   {tool_ms:.2f} ms (whole process), identical output")
    print(f"// reproduce:  {' '.join(command)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
