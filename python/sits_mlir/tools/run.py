"""sits-run: run a compiled SITS model (.sitsm) on inputs from a .npz file.

    sits-run model.sitsm --inputs inputs.npz [--repeat N] [--threads N]

Prints each output (name, shape, dtype and a short summary of its values)
and the latency, median and minimum over the timed runs. The .npz keys are
the input names (``np.savez(f, x=..., y=...)``), or ``arr_0``, ``arr_1``, ...
for positional inputs (``np.savez(f, a, b)``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Sequence

import numpy as np

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sits-run",
        description="Run a compiled SITS model (.sitsm) and time it.")
    p.add_argument("model", help="the .sitsm artifact")
    p.add_argument("--inputs", metavar="NPZ",
                   help="inputs as a .npz file (keys: input names, or arr_0, arr_1, ...)")
    p.add_argument("--entry", metavar="NAME",
                   help="entry point to run (default: main, or the only one)")
    p.add_argument("--repeat", type=int, default=10, metavar="N",
                   help="timed runs (default: 10)")
    p.add_argument("--warmup", type=int, default=1, metavar="N",
                   help="untimed runs first (default: 1)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="worker threads (default: $SITS_NUM_THREADS or the CPU count)")
    p.add_argument("--device", default="cpu", help="device URI (default: cpu)")
    p.add_argument("--trusted-key", action="append", metavar="PUB",
                   help="require a signature by this Ed25519 public key (PEM; repeatable; "
                        "default: $SITS_TRUSTED_KEYS)")
    p.add_argument("--save", metavar="NPZ", help="write the outputs to a .npz file")
    p.add_argument("--info", action="store_true",
                   help="describe the model (target, entry points) and exit")
    return p


def _summary(a: np.ndarray, width: int = 6) -> str:
    """A one-line summary: statistics for numbers, then the first values."""
    flat = a.reshape(-1)
    if flat.size == 0:
        return "(empty)"
    parts = []
    if a.dtype.kind in "fiu" and a.dtype.itemsize > 0:
        values = flat.astype(np.float64)
        finite = values[np.isfinite(values)]
        if finite.size:
            parts.append(f"min {finite.min():.6g}  max {finite.max():.6g}  "
                         f"mean {finite.mean():.6g}")
        nonfinite = flat.size - finite.size
        if nonfinite:
            parts.append(f"{nonfinite} non-finite")
    elif a.dtype.kind == "b":
        parts.append(f"{int(flat.sum())} of {flat.size} true")
    head = np.array2string(flat[:width], precision=5, separator=", ",
                           max_line_width=10_000)
    if flat.size > width:
        head = head[:-1] + ", ...]"
    parts.append(head)
    return "  ".join(parts)


def _inputs_from(npz_path: str | None, entry) -> tuple[list, dict]:
    if npz_path is None:
        return [], {}
    with np.load(npz_path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    names = [s.name for s in entry.inputs]
    positional = sorted((k for k in arrays if k.startswith("arr_") and k[4:].isdigit()),
                        key=lambda k: int(k[4:]))
    if positional and not any(k in names for k in arrays):
        return [arrays[k] for k in positional], {}
    return [], arrays


def _describe(model) -> str:
    m = model.manifest
    t = m.get("target", {})
    lines = [
        f"{model.path}: SITS artifact format {m.get('format_version')}, "
        f"sits {m.get('sits_version')}, LLVM {m.get('llvm_version')}",
        f"  target {t.get('name')} ({t.get('triple')}, cpu {t.get('cpu')}, "
        f"{len(t.get('features', []))} features)",
        f"  content hash {model.content_hash}",
    ]
    for ep in model.entry_points.values():
        lines.append(f"  entry point {ep.name} ({ep.symbol})"
                     + ("  [uses weights]" if ep.has_weights else ""))
        for s in ep.inputs:
            lines.append(f"    input  {s}")
        for s in ep.outputs:
            lines.append(f"    output {s}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.repeat < 1 or args.warmup < 0:
        print("sits-run: error: --repeat must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 2

    from .. import runtime
    from ..errors import SitsError

    try:
        if args.threads is not None:
            runtime.set_num_threads(args.threads)
        model = runtime.load(args.model, device=args.device, trusted_keys=args.trusted_key)
        if args.info:
            print(_describe(model))
            return 0
        entry = model.entry(args.entry) if args.entry else model.default_entry
        positional, named = _inputs_from(args.inputs, entry)
        for _ in range(args.warmup):
            entry.run(*positional, **named)
        times = []
        outputs = ()
        for _ in range(args.repeat):
            start = time.perf_counter()
            outputs = entry.run(*positional, **named)
            times.append(time.perf_counter() - start)
    except SitsError as e:
        print(f"sits-run: error: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:  # unreadable .npz and the like
        print(f"sits-run: error: {e}", file=sys.stderr)
        return 1

    print(f"{args.model}: entry point '{entry.name}' on {model.device} "
          f"with {runtime.num_threads()} threads")
    for spec, out in zip(entry.outputs, outputs):
        shape = "(" + ", ".join(map(str, out.shape)) + ")"
        print(f"  {spec.name}: shape {shape} {spec.dtype}  {_summary(out)}")
    ms = [t * 1e3 for t in times]
    print(f"latency over {len(ms)} run{'s' if len(ms) != 1 else ''}: "
          f"median {statistics.median(ms):.3f} ms, min {min(ms):.3f} ms")
    if args.save:
        np.savez(args.save, **{s.name: o for s, o in zip(entry.outputs, outputs)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
