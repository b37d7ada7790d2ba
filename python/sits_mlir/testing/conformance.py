"""The ONNX backend node tests through SITS, with an expected-status list.

Every case of `onnx.backend.test` (kind "node": 1,884 in onnx 1.23.2) is
compiled for the CPU by `SitsBackend` and run on each of its data sets; the
outputs are compared as ONNX's own runner compares them (the case's rtol and
atol; exact for integers and bools; shapes and dtypes must agree).

A case ends in one status:

    pass           every output matches, every input fed at run time
    frozen         passes only with its parameter inputs (axes, shapes,
                   scales, ...) frozen to the case's values: not a pass, as
                   a user who feeds them at run time gets a CompileError
    unsupported    the pre-flight check refused a node (`UnsupportedNode`)
    compile-error  compilation failed after the pre-flight check
    run-error      the runtime refused the inputs or failed
    mismatch       outputs differ (shape, dtype or values)
    crash          the worker process died (a bug: SITS must never crash)
    timeout        the case took longer than --timeout seconds

Cases run in worker processes (--jobs), so a crash loses one case, not the
run. Compiled artifacts are cached (`SITS_CONFORMANCE_CACHE`, default
~/.cache/sits-mlir/conformance) under a key of the model, the mode and the
compiler's binaries, so a rerun with an unchanged compiler only runs.

The expected statuses live in test/conformance/onnx-node-<mode>.txt, one
line per case: `<case> pass` or `<case> <status> <one-line reason>`. Against
that list, a case listed as pass that does not pass is a regression, and a
case that passes but is listed otherwise must be promoted (`--update`
rewrites the list from a run).

    python -m sits_mlir.testing.conformance                 # counts by status and by op
    python -m sits_mlir.testing.conformance -k 'test_add'   # a subset (regex)
    python -m sits_mlir.testing.conformance --mode dynamic  # every input dim dynamic
    python -m sits_mlir.testing.conformance --check LIST    # exit 1 on any difference
    python -m sits_mlir.testing.conformance --update LIST
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import select
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Iterable

import ml_dtypes
import numpy as np
import onnx
import onnx.numpy_helper

STATUSES = ("pass", "frozen", "unsupported", "compile-error", "run-error", "mismatch", "crash",
            "timeout")
#: The onnx release the expected lists were recorded with: other releases
#: have other cases.
ONNX_VERSION = "1.23.2"


@dataclass
class Result:
    name: str
    status: str
    reason: str = ""
    op: str = ""
    seconds: float = 0.0


def default_cache_dir() -> str:
    return os.environ.get("SITS_CONFORMANCE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "sits-mlir", "conformance")


def load_cases() -> dict:
    """name -> onnx.backend.test TestCase, for every node case."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return {c.name: c for c in load_model_tests(kind="node")}


def case_op(case, cases: dict | None = None) -> str:
    """The op a node case tests: its graph's (last) node, with its domain;
    for a function's expansion (`<case>_expanded...`), its base case's op."""
    base = re.sub(r"_expanded.*$", "", case.name)
    if cases and base != case.name and base in cases:
        case = cases[base]
    nodes = case.model.graph.node
    if not nodes:
        return "?"
    node = nodes[-1]
    return f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _compile_reason(error) -> tuple[str, str]:
    from ..errors import UnsupportedNode

    unsupported = [d for d in error.diagnostics if isinstance(d, UnsupportedNode)]
    if unsupported:
        d = unsupported[0]
        return "unsupported", _one_line(f"{d.op_type}: {d.message}")
    first = error.diagnostics[0].message if error.diagnostics else error.summary
    return "compile-error", _one_line(first)


def as_array(value) -> np.ndarray:
    """A data set's value as NumPy (ml_dtypes for bf16, fp8, int4, ...):
    cases whose types NumPy lacks store TensorProtos."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


def _is_float(dtype: np.dtype) -> bool:
    if dtype.kind == "f":
        return True
    try:  # ml_dtypes floats (bfloat16, float8_*, float4_*) have finfo
        ml_dtypes.finfo(dtype)
        return True
    except (ValueError, TypeError):
        return False


def compare(name: str, expected: np.ndarray, actual, rtol: float, atol: float) -> str:
    """'' when `actual` matches `expected` as ONNX's runner requires, else why."""
    actual = as_array(actual)
    expected = as_array(expected)
    if expected.dtype == object or actual.dtype == object:
        return f"{name}: non-numeric output"
    if actual.shape != expected.shape:
        return f"{name}: shape {actual.shape}, expected {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"{name}: dtype {actual.dtype}, expected {expected.dtype}"
    if not _is_float(expected.dtype):
        if expected.dtype.kind == "V":  # ml_dtypes integers (int4, uint2, ...)
            expected, actual = expected.astype(np.int64), actual.astype(np.int64)
        bad = actual != expected
        if bad.any():
            return f"{name}: {int(bad.sum())} of {bad.size} elements differ"
        return ""
    e = expected.astype(np.float64)
    a = actual.astype(np.float64)
    same_nan = np.isnan(e) & np.isnan(a)
    same_inf = np.isinf(e) & (e == a)
    close = np.isclose(a, e, rtol=rtol, atol=atol) | same_nan | same_inf
    if not close.all():
        err = np.abs(a - e)[~close]
        return (f"{name}: {int((~close).sum())} of {close.size} elements differ "
                f"(max abs error {np.nanmax(err) if err.size else float('nan'):.3g})")
    return ""


#: Inputs that parametrise an op rather than carry data (axes, shapes,
#: sizes, pads, ...): (op type, input index). Exported models hold them as
#: constants; node tests feed them as graph inputs.
PARAMETER_INPUTS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Split": (1,),
    "Squeeze": (1,), "Unsqueeze": (1,), "Pad": (1, 2, 3), "Resize": (1, 2, 3),
    "Upsample": (1,), "TopK": (1,), "Trilu": (1,), "OneHot": (1,), "Range": (0, 1, 2),
    "ConstantOfShape": (0,), "CumSum": (1,), "CumProd": (1,), "CenterCropPad": (1,),
    "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
    "ReduceProd": (1,), "ReduceSumSquare": (1,), "ReduceL1": (1,), "ReduceL2": (1,),
    "ReduceLogSum": (1,), "ReduceLogSumExp": (1,), "Clip": (1, 2),
}


def parameter_inputs(model) -> list[str]:
    """Graph inputs that only feed PARAMETER_INPUTS slots."""
    g = model.graph
    initializers = {t.name for t in g.initializer}
    inputs = [i.name for i in g.input if i.name not in initializers]
    params, data = set(), set()
    for node in g.node:
        slots = PARAMETER_INPUTS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ()
        for k, name in enumerate(node.input):
            (params if k in slots else data).add(name)
    return [n for n in inputs if n in params and n not in data]


def freeze_inputs(model, names, values: dict):
    """`model` with the graph inputs `names` turned into initializers."""
    frozen = onnx.ModelProto.FromString(model.SerializeToString())
    keep = [i for i in frozen.graph.input if i.name not in names]
    del frozen.graph.input[:]
    frozen.graph.input.extend(keep)
    for n in names:
        frozen.graph.initializer.append(onnx.numpy_helper.from_array(values[n], n))
    return frozen


def run_case(case, mode: str, cache_dir: str | None) -> tuple[str, str]:
    """(status, reason) of one case.

    A case whose parameter inputs (axes, shapes, scales, ...) must be
    constants for SITS is compiled again with them frozen to the case's
    values when every data set agrees on them, as onnx-mlir's harness does
    for the same cases; passing that way is "frozen", not "pass", and its
    reason names the inputs ("constant inputs: ...")."""
    from ..errors import CompileError
    from .onnx_backend import SitsBackend

    dynamic = mode == "dynamic"
    model, data_sets, note = case.model, case.data_sets, ""
    try:
        rep = SitsBackend.prepare(model, dynamic=dynamic, cache_dir=cache_dir)
    except CompileError as e:
        status, reason = _compile_reason(e)
        frozen = _frozen_variant(case) if status == "unsupported" else None
        if frozen is None:
            return status, reason
        model, data_sets, names = frozen
        try:
            rep = SitsBackend.prepare(model, dynamic=dynamic, cache_dir=cache_dir)
        except CompileError as e2:
            return _compile_reason(e2)
        except Exception as e2:  # noqa: BLE001 - any other failure is the compiler's bug
            return "compile-error", _one_line(f"{type(e2).__name__}: {e2}")
        note = "constant inputs: " + ", ".join(names)
    except Exception as e:  # noqa: BLE001 - any other failure is the compiler's bug
        return "compile-error", _one_line(f"{type(e).__name__}: {e}")
    status, reason = _run_data_sets(rep, model, data_sets, case.rtol, case.atol)
    if note and status == "pass":
        status = "frozen"
    return status, (f"{note}; {reason}" if reason and note else reason or note)


def _frozen_variant(case):
    """(model with parameter inputs frozen, data sets without them, names),
    or None when there are none or the data sets disagree on them."""
    names = parameter_inputs(case.model)
    if not names:
        return None
    initializers = {t.name for t in case.model.graph.initializer}
    order = [i.name for i in case.model.graph.input if i.name not in initializers]
    values = None
    data_sets = []
    for inputs, expected in case.data_sets:
        by_name = dict(zip(order, (as_array(x) for x in inputs)))
        these = {n: by_name[n] for n in names if n in by_name}
        if values is None:
            values = these
        elif any(not np.array_equal(values[n], these[n]) for n in names):
            return None
        data_sets.append(([by_name[n] for n in order if n not in names], expected))
    if values is None or set(values) != set(names):
        return None
    return freeze_inputs(case.model, names, values), data_sets, names


def _run_data_sets(rep, model, data_sets, rtol, atol) -> tuple[str, str]:
    from ..errors import SitsError

    outputs = [o.name for o in model.graph.output]
    for inputs, expected in data_sets:
        try:
            actual = rep.run([as_array(x) for x in inputs])
        except (SitsError, ValueError, TypeError, RuntimeError) as e:
            return "run-error", _one_line(f"{type(e).__name__}: {e}")
        if len(actual) != len(expected):
            return "mismatch", f"{len(actual)} outputs, expected {len(expected)}"
        for name, want, got in zip(outputs, expected, actual):
            why = compare(name, want, got, rtol, atol)
            if why:
                return "mismatch", _one_line(why)
    return "pass", ""


# --------------------------------------------------------------------------
# Worker processes: one case name per stdin line, one JSON result per line.


def _worker(mode: str, cache_dir: str) -> None:
    cases = load_cases()
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write to the result stream
    for line in sys.stdin:
        name = line.strip()
        start = time.perf_counter()
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            status, reason = run_case(cases[name], mode, cache_dir)
        out.write(json.dumps({"name": name, "status": status, "reason": reason,
                              "seconds": time.perf_counter() - start}) + "\n")
        out.flush()


class _Worker:
    def __init__(self, mode: str, cache_dir: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sits_mlir.testing.conformance", "--worker",
             "--mode", mode, "--cache", cache_dir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1)
        self.case: str | None = None
        self.started = 0.0

    def send(self, name: str) -> None:
        self.case, self.started = name, time.monotonic()
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run_cases(names: Iterable[str], *, mode: str = "static", jobs: int = 0,
              timeout: float = 300.0, cache_dir: str | None = None,
              progress=None) -> dict[str, Result]:
    """Runs the named cases in `jobs` worker processes; name -> Result."""
    cases = load_cases()
    names = list(names)
    unknown = [n for n in names if n not in cases]
    if unknown:
        raise KeyError(f"unknown ONNX node cases: {', '.join(unknown[:5])}")
    cache_dir = cache_dir or default_cache_dir()
    os.makedirs(cache_dir, exist_ok=True)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(names) or 1))
    pending = collections.deque(names)
    results: dict[str, Result] = {}
    workers = [_Worker(mode, cache_dir) for _ in range(jobs)]

    def finish(name, status, reason, seconds):
        results[name] = Result(name, status, reason, case_op(cases[name], cases), seconds)
        if progress:
            progress(results[name], len(results), len(names))

    try:
        for w in workers:
            if pending:
                w.send(pending.popleft())
        while any(w.case for w in workers):
            busy = {w.proc.stdout.fileno(): w for w in workers if w.case}
            ready, _, _ = select.select(list(busy), [], [], 1.0)
            for fd in ready:
                w = busy[fd]
                line = w.proc.stdout.readline()
                if line:
                    r = json.loads(line)
                    finish(r["name"], r["status"], r["reason"], r["seconds"])
                else:  # the worker died inside the case
                    code = w.proc.wait()
                    finish(w.case, "crash", f"worker exited with status {code}",
                           time.monotonic() - w.started)
                    w.close()
                    workers[workers.index(w)] = w = _Worker(mode, cache_dir)
                w.case = None
                if pending:
                    w.send(pending.popleft())
            now = time.monotonic()
            for i, w in enumerate(workers):
                if w.case and now - w.started > timeout:
                    finish(w.case, "timeout", f"no result after {timeout:.0f} s", now - w.started)
                    w.close()
                    workers[i] = w = _Worker(mode, cache_dir)
                    if pending:
                        w.send(pending.popleft())
    finally:
        for w in workers:
            w.close()
    return {n: results[n] for n in names}


# --------------------------------------------------------------------------
# The expected-status list.


def read_expected(path: str) -> dict[str, tuple[str, str]]:
    """name -> (status, reason) from an expected-status list."""
    expected = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 2 or parts[1] not in STATUSES:
                raise ValueError(f"{path}:{lineno}: expected '<case> <status> [reason]'")
            expected[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    return expected


def write_expected(path: str, results: dict[str, Result], mode: str) -> None:
    counts = collections.Counter(r.status for r in results.values())
    with open(path, "w") as f:
        f.write(f"# ONNX {ONNX_VERSION} backend node tests through SITS, {mode} shapes.\n"
                "# <case> <status> [reason]; written by\n"
                f"#   python -m sits_mlir.testing.conformance --mode {mode} --update {os.path.basename(path)}\n"
                f"# {counts['pass']} of {len(results)} pass with every input fed at run "
                f"time; {counts['frozen']} more only with\n# their parameter inputs frozen "
                "to constants (status frozen, not counted).\n")
        for name in sorted(results):
            r = results[name]
            f.write(f"{name} {r.status}" + (f" {r.reason}" if r.reason else "") + "\n")


def differences(expected: dict[str, tuple[str, str]], results: dict[str, Result]) -> list[str]:
    """Regressions, cases to promote and unlisted cases; empty when the run
    agrees with the list."""
    problems = []
    for name, r in sorted(results.items()):
        if name not in expected:
            problems.append(f"{name}: not in the expected list (it is {r.status})")
            continue
        want = expected[name][0]
        if want in ("pass", "frozen") and r.status not in ("pass", want):
            problems.append(f"{name}: regressed to {r.status}: {r.reason}")
        elif want != r.status and r.status in ("pass", "frozen"):
            problems.append(f"{name}: is {r.status} now; promote it (--update)")
    return problems


def summary(results: dict[str, Result]) -> str:
    by_status = collections.Counter(r.status for r in results.values())
    lines = [f"{len(results)} cases: " + ", ".join(
        f"{by_status[s]} {s}" for s in STATUSES if by_status[s]),
        "(frozen: passes only with its parameter inputs as constants; not a pass)"]
    by_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results.values():
        by_op[r.op][r.status] += 1
    width = max((len(op) for op in by_op), default=2)
    header = f"{'op':<{width}}  " + "  ".join(f"{s:>13}" for s in STATUSES)
    lines += ["", header, "-" * len(header)]
    for op in sorted(by_op, key=lambda o: (-sum(by_op[o].values()) + by_op[o]["pass"], o)):
        c = by_op[op]
        lines.append(f"{op:<{width}}  " + "  ".join(
            f"{c[s] if c[s] else '':>13}" for s in STATUSES))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m sits_mlir.testing.conformance",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("-k", "--filter", help="only cases whose name matches this regex")
    p.add_argument("--mode", choices=("static", "dynamic"), default="static")
    p.add_argument("-j", "--jobs", type=int, default=0, help="worker processes (0: one per core)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    p.add_argument("--cache", default=None, help="artifact cache directory")
    p.add_argument("--check", metavar="LIST", help="compare with an expected-status list")
    p.add_argument("--update", metavar="LIST", help="write the expected-status list")
    p.add_argument("--json", metavar="FILE", help="write every result as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        _worker(args.mode, args.cache or default_cache_dir())
        return 0

    names = sorted(load_cases())
    if args.filter:
        names = [n for n in names if re.search(args.filter, n)]
    start = time.monotonic()

    def progress(r: Result, done: int, total: int):
        if args.verbose:
            print(f"[{done}/{total}] {r.name} {r.status} {r.reason}", flush=True)
        elif done % 100 == 0 or done == total:
            print(f"[{done}/{total}] {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)

    results = run_cases(names, mode=args.mode, jobs=args.jobs, timeout=args.timeout,
                        cache_dir=args.cache, progress=progress)
    print(summary(results))
    print(f"\n{time.monotonic() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({n: vars(r) for n, r in results.items()}, f, indent=1)
    if args.update:
        if args.filter:
            old = read_expected(args.update) if os.path.exists(args.update) else {}
            merged = {n: Result(n, s, why) for n, (s, why) in old.items()}
            merged.update(results)
            results = merged
        write_expected(args.update, results, args.mode)
    if args.check:
        problems = differences(read_expected(args.check), results)
        for line in problems:
            print(line)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
