"""Graph glue is compiled unoptimized: a large function without a loop (an
entry point or a layer calling kernel after kernel) is marked optnone, so
that its compile time does not grow with the graph; kernels, which loop,
and small functions are optimized as before."""

import re

import pytest

from sits_mlir import ir
from sits_mlir._mlir_libs import _sits


def _chain(name: str, length: int) -> str:
    body = ["%v0 = llvm.add %a, %a : i64"]
    body += [f"%v{i} = llvm.add %v{i - 1}, %a : i64" for i in range(1, length)]
    return (f"llvm.func @{name}(%a: i64) -> i64 {{\n  " + "\n  ".join(body) +
            f"\n  llvm.return %v{length - 1} : i64\n}}\n")


LOOP = """
llvm.func @kernel(%n: i64) -> i64 {
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  llvm.br ^loop(%zero, %zero : i64, i64)
^loop(%i: i64, %acc: i64):
  %next = llvm.add %i, %one : i64
  %sum = llvm.add %acc, %i : i64
  %done = llvm.icmp "sge" %next, %n : i64
  llvm.cond_br %done, ^exit, ^loop(%next, %sum : i64, i64)
^exit:
  llvm.return %sum : i64
}
"""


def _attributes(ir_text: str, name: str) -> str:
    """The attribute group text of function `name` in LLVM IR."""
    m = re.search(rf"define [^@]*@{name}\([^)]*\)[^{{]*#(\d+)", ir_text)
    if m is None:
        return ""
    group = re.search(rf"attributes #{m.group(1)} = \{{([^}}]*)\}}", ir_text)
    return group.group(1) if group else ""


def test_large_loop_free_function_is_not_optimized():
    source = _chain("glue", 1500) + _chain("small", 20) + LOOP
    with ir.Context():
        module = ir.Module.parse(source)
        ok, text, diagnostics = _sits.emit_llvm_ir(module.operation, "x86_64-unknown-linux-gnu",
                                                   "x86-64", "", 3)
    assert ok, diagnostics
    text = text.decode() if isinstance(text, bytes) else text
    assert "optnone" in _attributes(text, "glue")
    assert "optnone" not in _attributes(text, "small")
    assert "optnone" not in _attributes(text, "kernel")
    # The small function is optimized: its chain of adds folds into one multiply.
    small = re.search(r"define [^@]*@small\(.*?\n\}", text, re.S).group(0)
    assert small.count(" add ") < 3


@pytest.mark.parametrize("jobs", [1, 2])
def test_objects_emit_with_glue(jobs):
    source = _chain("glue", 1500) + _chain("other", 1200) + LOOP
    with ir.Context():
        module = ir.Module.parse(source)
        ok, objects, diagnostics = _sits.emit_objects(module.operation, "x86_64-unknown-linux-gnu",
                                                      "x86-64", "", 3, jobs)
    assert ok, diagnostics
    assert objects and all(len(o) > 0 for o in objects)
