"""sits-import-onnx: print the SITS IR the ONNX frontend imports a model as.

    python -m sits_mlir.frontend.onnx model.onnx [-o model.mlir]
    sits-import-onnx model.onnx --dynamic-dim batch=1 --dynamic-dim seq=128
    sits-import-onnx model.onnx --generic --debug-info

The FileCheck surface of the frontend (test/lit/Frontend): the module is
printed as `str(imported.module)` would print it, weights included (as
`dense_resource` blobs at the end), so the output parses back with
`sits-opt`. Errors (no such file, not an
ONNX model, every unsupported node at once) go to stderr and the exit
status is 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

__all__ = ["main"]

_PROG = "sits-import-onnx"


def _dynamic_dim(text: str) -> tuple:
    name, sep, size = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE, got '{text}'")
    size = size.strip()
    if size in ("?", ""):
        return name, None
    try:
        value = int(size)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"the size of '{name}' must be a non-negative integer or '?', got '{size}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"the size of '{name}' must be a non-negative integer or '?', got '{size}'")
    return name, value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=_PROG, description="Import an ONNX model into the SITS dialect and print the IR.")
    p.add_argument("model", help="the ONNX model (.onnx; external data is read from its folder)")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="write the IR to PATH (default: standard output)")
    p.add_argument("--dynamic-dim", dest="dynamic_dims", action="append", default=[],
                   type=_dynamic_dim, metavar="NAME=SIZE",
                   help="fix the symbolic input dimension NAME (an ONNX dim_param) to SIZE "
                        "before shape inference ('?' keeps it dynamic); repeatable")
    p.add_argument("--generic", action="store_true",
                   help="print the generic op form")
    p.add_argument("--debug-info", action="store_true",
                   help="print locations (each op's ONNX node name)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    from ...errors import SitsError

    try:
        from . import import_model

        imported = import_model(args.model, dynamic_dims=dict(args.dynamic_dims) or None)
        kwargs = dict(print_generic_op_form=args.generic, enable_debug_info=args.debug_info)
        if args.output:
            try:
                with open(args.output, "w") as f:
                    imported.module.operation.print(file=f, **kwargs)
            except OSError as e:
                print(f"{_PROG}: error: cannot write '{args.output}': {e.strerror or e}",
                      file=sys.stderr)
                return 1
        else:
            imported.module.operation.print(file=sys.stdout, **kwargs)
            sys.stdout.flush()
    except SitsError as error:
        print(f"{_PROG}: error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `sits-import-onnx model.onnx | head`: the reader left. Point stdout
        # at /dev/null so that flushing it at exit raises nothing more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
