"""State helpers of the KV allocator's Python tests (spec §5: every error
test compares the full observable state before and after the failing
call)."""

from __future__ import annotations

import numpy as np
import pytest

from sits_mlir.runtime import kv

#: Counters an error may change (spec §4.3), and the lookup counter (O8).
VOLATILE = {"failed_calls", "out_of_blocks_failures", "lookups"}


def state(a: kv.KVAllocator) -> dict:
    """The observable state as plain Python values, comparable with ==."""
    snap = a.snapshot()

    def plain(v):
        if isinstance(v, np.ndarray):
            return v.tolist()
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    out = plain({k: v for k, v in snap.items() if k != "stats"})
    out["stats"] = {k: v for k, v in snap["stats"].as_dict().items() if k not in VOLATILE}
    return out


def fails_unchanged(a: kv.KVAllocator, exc_type, fn, *args, **kwargs):
    """Runs fn(*args), expects `exc_type`, checks that the state did not
    change and the invariants hold; returns the exception."""
    before = state(a)
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert state(a) == before, f"{fn.__name__} changed the state on error"
    a.check_invariants()
    return info.value
