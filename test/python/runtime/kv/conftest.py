"""Fixtures of the KV allocator's Python tests; the state helpers are in
kv_checks.py (a module of its own: `conftest` names a different module in
every test folder)."""

from __future__ import annotations

import pytest

from sits_mlir.runtime import kv


@pytest.fixture
def pool():
    """pool(**fields) -> a small allocator (block_size 4 unless given),
    checked and closed at the end of the test."""
    made = []

    def make(**fields):
        fields.setdefault("block_size", 4)
        fields.setdefault("num_blocks", 33)
        a = kv.KVAllocator(**fields)
        made.append(a)
        return a

    yield make
    for a in made:
        if not a.closed and not a.poisoned:
            a.check_invariants()
        a.close()
