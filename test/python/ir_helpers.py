"""Helpers shared by the pytest modules (importable by name: test/python is
on sys.path through pytest's rootdir handling)."""

import collections

from sits_mlir import ir, passmanager


def tensor(shape, element="f32", encoding=None):
    """`tensor<...>` from a shape list; None is a dynamic extent."""
    elem = ir.Type.parse(element) if isinstance(element, str) else element
    dims = [ir.ShapedType.get_dynamic_size() if d is None else d for d in shape]
    return ir.RankedTensorType.get(dims, elem, encoding)


def module_summary(module):
    """(op counts, location counts) of `module` after canonicalize and cse:
    equal for two imports that build the same module up to op order."""
    passmanager.PassManager.parse("builtin.module(canonicalize, cse)").run(module.operation)
    ops, locs = collections.Counter(), collections.Counter()

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    ops[inner.operation.name] += 1
                    locs[str(inner.location)] += 1
                    walk(inner.operation)
    walk(module.operation)
    return ops, locs
