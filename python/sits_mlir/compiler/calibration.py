"""Activation statistics for sits-mixed-precision, measured on a calibration
set.

The pass corrects each quantized matmul's or convolution's bias with the
input's mean per channel and weighs its error estimates with the input's mean
square. Given sample inputs, `attach_input_stats` measures both: it compiles
a copy of the model at full precision whose `@main` also returns the input of
every constant-weight `sits.matmul` and `sits.conv`, runs it on the samples,
and records the statistics on the original ops as `sits.input_stats = {mean,
mean_square}` (per channel: the last dimension of a matmul's input, over all
others; dimension 1 of a convolution's, over batch and pixels). The pass pipeline then reads them from the IR, so that
`sits-opt` on the module reproduces the compile.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Iterable

import numpy as np

from .. import ir
from ..errors import CompileError

__all__ = ["attach_input_stats", "calibration_samples"]


def calibration_samples(calibration: Any) -> list[dict]:
    """The samples of a `CompileOptions.calibration` value: one dict of input
    arrays, or a sequence of them."""
    if isinstance(calibration, dict):
        return [calibration]
    samples = list(calibration)
    if not samples or not all(isinstance(s, dict) for s in samples):
        raise ValueError("calibration must be a dict of input arrays or a non-empty "
                         "sequence of such dicts")
    return samples


def _main(module: ir.Module):
    for op in module.body.operations:
        if op.operation.name == "func.func" and \
                ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise CompileError("the model has no public function @main")


def _weight_matmuls(func) -> list:
    """The sits.matmul and sits.conv ops of `func`'s body (not nested
    regions) whose weight (rhs, filter) is a constant: the ones
    sits-mixed-precision quantizes."""
    found = []
    for block in func.regions[0].blocks:
        for op in block.operations:
            op = op.operation
            if op.name not in ("sits.matmul", "sits.conv"):
                continue
            owner = op.operands[1].owner
            if not isinstance(owner, ir.Block) and \
                    getattr(owner, "operation", owner).name == "arith.constant":
                found.append(op)
    return found


def attach_input_stats(module: ir.Module, samples: Iterable[dict], threads: int = 0,
                       input_names: list[str] | None = None) -> int:
    """Measures the input statistics of `module`'s constant-weight matmuls
    and convolutions on `samples` and attaches them as `sits.input_stats`.
    `input_names` orders a sample's arrays as @main's arguments (default: the
    samples' own order). Returns how many ops got statistics."""
    from .. import runtime
    from .driver import compile as _compile

    samples = list(samples)
    matmuls = _weight_matmuls(_main(module))
    if not matmuls:
        return 0

    # A copy whose @main also returns every matmul's and convolution's input.
    with module.context, ir.Location.unknown():
        # The copy shares the weights' resource blobs with the original.
        copy = module.operation.clone()
        probe_module = ir.Module.create()
        for attr in copy.attributes:
            probe_module.operation.attributes[attr.name] = attr.attr
        for op in list(copy.regions[0].blocks[0].operations):
            probe_module.body.append(op)
        copy.erase()
        main = _main(probe_module)
        probes = _weight_matmuls(main)
        assert len(probes) == len(matmuls)
        ret = main.regions[0].blocks[0].operations[-1] if len(main.regions[0].blocks) == 1 \
            else None
        if ret is None or ret.operation.name != "func.return":
            raise CompileError("calibration needs @main to be a single block ending in a return")
        extra = [op.operands[0] for op in probes]
        operands = list(ret.operation.operands) + extra
        with ir.InsertionPoint(ret):
            ir.Operation.create("func.return", operands=operands)
        ret.operation.erase()
        ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(ftype.inputs), list(ftype.results) + [v.type for v in extra]))
        first_extra = len(ftype.results)

    fd, path = tempfile.mkstemp(suffix=".sitsm", prefix="sits-calibration-")
    os.close(fd)
    try:
        _compile(probe_module, "cpu", path, threads=threads, precision="fp32")
        model = runtime.model._load_own(path)
        sums = [None] * len(matmuls)
        squares = [None] * len(matmuls)
        count = [0] * len(matmuls)
        for sample in samples:
            names = input_names or list(sample)
            missing = [n for n in names if n not in sample]
            if missing:
                raise ValueError(f"calibration sample lacks input(s) {', '.join(missing)}")
            outs = model.run(*[np.asarray(sample[n]) for n in names])
            for i, x in enumerate(outs[first_extra:]):
                x = np.asarray(x, dtype=np.float64)
                if matmuls[i].name == "sits.conv":  # [N, C, D...]: channels first
                    x = np.moveaxis(x, 1, -1)
                x = x.reshape(-1, x.shape[-1])
                sums[i] = x.sum(0) if sums[i] is None else sums[i] + x.sum(0)
                sq = (x * x).sum(0)
                squares[i] = sq if squares[i] is None else squares[i] + sq
                count[i] += x.shape[0]
    finally:
        os.unlink(path)

    with module.context:
        for op, s, sq, n in zip(matmuls, sums, squares, count):
            mean = ir.DenseElementsAttr.get(np.ascontiguousarray(s / n, dtype=np.float32))
            square = ir.DenseElementsAttr.get(np.ascontiguousarray(sq / n, dtype=np.float32))
            op.attributes["sits.input_stats"] = ir.DictAttr.get(
                {"mean": mean, "mean_square": square})
    return len(matmuls)
