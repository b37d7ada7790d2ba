"""sits.paged_attention compiled for the CPU against a NumPy reference:
prefill and decode of sequences of different lengths in one batch (left
padding), GQA, the pool updated in place through the slot mapping, and
out-of-range slots and block numbers that are not followed."""

import ml_dtypes
import numpy as np
import pytest

import sits_mlir
from sits_mlir import ir
from sits_mlir.runtime.errors import SignatureError

HQ, HKV, D, BS, LAYERS, LAYER, BLOCKS = 4, 2, 8, 4, 2, 1, 16

_IR = f"""
func.func @main(%q: tensor<?x{HQ}x?x{D}xf32>, %k: tensor<?x{HKV}x?x{D}xf32>,
                %v: tensor<?x{HKV}x?x{D}xf32>,
                %pool: tensor<?x{LAYERS}x2x{HKV}x{BS}x{D}xf32> {{sits.name = "kv_pool"}},
                %tables: tensor<?x?xi32>, %slots: tensor<?x?xi64>, %lens: tensor<?xi32>)
    -> (tensor<?x{HQ}x?x{D}xf32>, tensor<?x{LAYERS}x2x{HKV}x{BS}x{D}xf32> {{sits.updates = 3 : i64}}) {{
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {{layer = {LAYER}}}
      : (tensor<?x{HQ}x?x{D}xf32>, tensor<?x{HKV}x?x{D}xf32>, tensor<?x{HKV}x?x{D}xf32>,
         tensor<?x{LAYERS}x2x{HKV}x{BS}x{D}xf32>, tensor<?x?xi32>, tensor<?x?xi64>, tensor<?xi32>)
      -> (tensor<?x{HQ}x?x{D}xf32>, tensor<?x{LAYERS}x2x{HKV}x{BS}x{D}xf32>)
  return %o, %p : tensor<?x{HQ}x?x{D}xf32>, tensor<?x{LAYERS}x2x{HKV}x{BS}x{D}xf32>
}}
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    with ir.Context():
        module = ir.Module.parse(_IR)
        art = sits_mlir.compile(module, "cpu", tmp_path_factory.mktemp("paged") / "pa.sitsm",
                                threads=2)
    return art.load()


def _reference(q, k, v, pool, tables, slots, lens):
    """(output, pool after the writes); padding queries' rows are NaN."""
    pool = pool.copy()
    batch, _, width, _ = q.shape
    for b in range(batch):
        for s in range(width):
            slot = slots[b, s]
            if 0 <= slot < pool.shape[0] * BS:
                pool[slot // BS, LAYER, 0, :, slot % BS] = k[b, :, s]
                pool[slot // BS, LAYER, 1, :, slot % BS] = v[b, :, s]
    out = np.full(q.shape, np.nan, np.float32)
    for b in range(batch):
        positions = np.arange(lens[b])
        blocks = tables[b, positions // BS]
        keys = pool[blocks, LAYER, 0, :, positions % BS]      # [T, Hkv, D]
        values = pool[blocks, LAYER, 1, :, positions % BS]
        for s in range(width):
            pos = lens[b] - width + s
            if slots[b, s] < 0:
                continue
            for h in range(HQ):
                g = h // (HQ // HKV)
                scores = keys[:pos + 1, g] @ q[b, h, s] / np.sqrt(D)
                w = np.exp(scores - scores.max())
                out[b, h, s] = (w / w.sum()) @ values[:pos + 1, g]
    return out, pool


def _batch(rng, news, pasts):
    """Sequences with `news[b]` new tokens after `pasts[b]` cached ones,
    left-padded to the longest; each gets its own blocks."""
    batch, width = len(news), max(news)
    lens = np.array([p + n for p, n in zip(pasts, news)], np.int32)
    max_blocks = int(-(-lens.max() // BS))
    order = rng.permutation(BLOCKS)
    tables = order[:batch * max_blocks].reshape(batch, max_blocks).astype(np.int32)
    slots = np.full((batch, width), -1, np.int64)
    for b, (p, n) in enumerate(zip(pasts, news)):
        pos = np.arange(p, p + n)
        slots[b, width - n:] = tables[b, pos // BS] * BS + pos % BS
    q = rng.standard_normal((batch, HQ, width, D)).astype(np.float32)
    k = rng.standard_normal((batch, HKV, width, D)).astype(np.float32)
    v = rng.standard_normal((batch, HKV, width, D)).astype(np.float32)
    pool = rng.standard_normal((BLOCKS, LAYERS, 2, HKV, BS, D)).astype(np.float32)
    return q, k, v, pool, tables, slots, lens


@pytest.mark.parametrize("news,pasts", [([3, 2, 1], [2, 7, 2]),   # mixed prefill
                                        ([1, 1, 1, 1], [0, 4, 9, 14]),  # decode
                                        ([5], [0])])  # prompt
def test_matches_reference_and_updates_pool_in_place(model, news, pasts):
    rng = np.random.default_rng(sum(news) * 31 + len(pasts))
    q, k, v, pool, tables, slots, lens = _batch(rng, news, pasts)
    ref_out, ref_pool = _reference(q, k, v, pool, tables, slots, lens)
    (out,) = model.run(q, k, v, pool, tables, slots, lens)
    np.testing.assert_array_equal(pool, ref_pool)   # written in place, nothing else
    real = ~np.isnan(ref_out)
    np.testing.assert_allclose(out[real], ref_out[real], rtol=1e-5, atol=1e-5)
    assert np.isfinite(out).all()                   # padding rows too


def _shifted(n: int, byte_offset: int) -> np.ndarray:
    """A writable, C-contiguous float32 array of n elements `byte_offset`
    bytes past a 64-byte boundary."""
    raw = np.zeros(4 * n + 128, np.uint8)
    start = -raw.ctypes.data % 64 + byte_offset
    out = raw[start:start + 4 * n].view(np.float32)
    assert out.ctypes.data % 64 == byte_offset and out.flags.c_contiguous
    return out


def test_large_misaligned_pool_warns_once(model):
    rng = np.random.default_rng(12)
    q, k, v, _, tables, slots, lens = _batch(rng, [1], [2])
    blocks = (2 << 20) // (LAYERS * 2 * HKV * BS * D * 4)
    # Not even aligned to its floats: the runtime stages it, and says so.
    pool = _shifted(blocks * LAYERS * 2 * HKV * BS * D, 1).reshape(
        blocks, LAYERS, 2, HKV, BS, D)
    with pytest.warns(ResourceWarning, match="not aligned to its 4-byte elements"):
        model.run(q, k, v, pool, tables, slots, lens)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.run(q, k, v, pool, tables, slots, lens)  # said once
        # Aligned to its floats but not to a cache line: used in place, no
        # warning.
        aligned = _shifted(pool.size, 16).reshape(pool.shape)
        model.run(q, k, v, aligned, tables, slots, lens)


@pytest.mark.parametrize("byte_offset", [4, 1], ids=["float-aligned", "byte-misaligned"])
def test_misaligned_pool_is_updated_in_place(model, byte_offset):
    rng = np.random.default_rng(11)
    q, k, v, pool, tables, slots, lens = _batch(rng, [2, 1], [1, 6])
    ref_out, ref_pool = _reference(q, k, v, pool, tables, slots, lens)
    # A C-contiguous view past a 64-byte boundary. Aligned to its floats,
    # the code runs on it directly; misaligned within a float, on an
    # aligned copy, which must come back.
    shifted = _shifted(pool.size, byte_offset).reshape(pool.shape)
    shifted[...] = pool
    (out,) = model.run(q, k, v, shifted, tables, slots, lens)
    np.testing.assert_array_equal(shifted, ref_pool)
    real = ~np.isnan(ref_out)
    np.testing.assert_allclose(out[real], ref_out[real], rtol=1e-5, atol=1e-5)


def test_reference_interpreter_agrees():
    """sits_mlir.testing.reference's paged attention (the frontend tests'
    oracle) against this file's reference."""
    from sits_mlir.testing.reference import evaluate

    rng = np.random.default_rng(5)
    q, k, v, pool, tables, slots, lens = _batch(rng, [3, 1], [1, 5])
    ref_out, ref_pool = _reference(q, k, v, pool, tables, slots, lens)
    with ir.Context():
        out, new_pool = evaluate(ir.Module.parse(_IR), [q, k, v, pool, tables, slots, lens])
    np.testing.assert_array_equal(new_pool, ref_pool)
    real = ~np.isnan(ref_out)
    np.testing.assert_allclose(out[real], ref_out[real], rtol=1e-5, atol=1e-5)


def test_out_of_range_slots_and_blocks_are_not_followed(model):
    rng = np.random.default_rng(7)
    q, k, v, pool, tables, slots, lens = _batch(rng, [1, 1], [3, 5])
    slots[0, 0] = BLOCKS * BS + 3           # past the pool: dropped
    tables[1, 0] = 10_000                   # reads block 0 instead
    tables[1, 1] = -5
    before = pool.copy()
    (out,) = model.run(q, k, v, pool, tables, slots, lens)
    assert np.isfinite(out).all()
    changed = np.argwhere((pool != before).any(axis=(1, 2, 3, 5)))
    assert [tuple(c) for c in changed] == [(slots[1, 0] // BS, slots[1, 0] % BS)]


def test_pool_must_be_updatable(model):
    rng = np.random.default_rng(3)
    q, k, v, pool, tables, slots, lens = _batch(rng, [1], [2])
    assert model.default_entry.updated_inputs == {"kv_pool"}
    with pytest.raises(SignatureError, match="updated in place"):
        model.run(q, k, v, np.asfortranarray(pool), tables, slots, lens)
    with pytest.raises(SignatureError, match="updated in place"):
        model.run(q, k, v, pool.astype(np.float64), tables, slots, lens)
    pool.flags.writeable = False
    with pytest.raises(SignatureError, match="writable"):
        model.run(q, k, v, pool, tables, slots, lens)


# ---- quantized pools: rows of D INT8 or FP8 (E4M3) codes and their f32
# scale (kv_dtype="int8" / "fp8")

_CODES = {"int8": ("i8", np.int8), "fp8": ("f8E4M3FN", ml_dtypes.float8_e4m3fn)}


def _quantized_ir(kind):
    return _IR.replace(f"x{BS}x{D}xf32>", f"x{BS}x{D + 4}x{_CODES[kind][0]}>")


@pytest.fixture(scope="module", params=sorted(_CODES))
def quantized_model(request, tmp_path_factory):
    with ir.Context():
        module = ir.Module.parse(_quantized_ir(request.param))
        art = sits_mlir.compile(module, "cpu",
                                tmp_path_factory.mktemp("paged-q") / f"{request.param}.sitsm",
                                threads=2)
    return request.param, art.load()


def _quantized_pool(rng, kind):
    from sits_mlir.testing.reference import quantize_kv_rows

    dtype = _CODES[kind][1]
    scale = rng.uniform(0.1, 4.0, (BLOCKS, LAYERS, 2, HKV, BS, 1)).astype(np.float32)
    pool = quantize_kv_rows(rng.standard_normal((BLOCKS, LAYERS, 2, HKV, BS, D)) * scale, dtype)
    pool[..., 3, :] = quantize_kv_rows(np.zeros(D), dtype)   # all-zero rows: scale 0
    return pool


@pytest.mark.parametrize("news,pasts", [([3, 2, 1], [2, 7, 2]),
                                        ([1, 1, 1, 1], [0, 4, 9, 14]),
                                        ([5], [0])])
def test_quantized_pool_matches_reference(quantized_model, news, pasts):
    """New K/V are quantized as they are written (the same bytes as the
    reference's rounding), and attention reads the dequantized rows."""
    from sits_mlir.testing.reference import evaluate

    kind, model = quantized_model
    rng = np.random.default_rng(sum(news) * 17 + len(pasts))
    q, k, v, _, tables, slots, lens = _batch(rng, news, pasts)
    k[0, 0, -1] = 0.0                                   # a zero row: scale 0
    v[-1, -1, -1, 1] = 1e3                              # an outlier channel
    pool = _quantized_pool(rng, kind)
    with ir.Context():
        ref_out, ref_pool = evaluate(ir.Module.parse(_quantized_ir(kind)),
                                     [q, k, v, pool, tables, slots, lens])
    (out,) = model.run(q, k, v, pool, tables, slots, lens)
    np.testing.assert_array_equal(pool.view(np.int8), ref_pool.view(np.int8))
    live = (slots >= 0)[:, None, :, None].repeat(HQ, 1).repeat(D, 3)
    np.testing.assert_allclose(out[live], ref_out[live], rtol=1e-4, atol=1e-4)
    assert np.isfinite(out).all()


def test_quantized_pool_stays_close_to_float_attention(quantized_model, model):
    """Against the f32 pool on the same K/V: INT8 keeps each element within
    half a step (max|row| / 254), FP8 E4M3 within 1/16 of it (3 mantissa
    bits) or of the smallest subnormal step."""
    from sits_mlir.testing.reference import dequantize_kv_rows, quantize_kv_rows

    kind, quantized = quantized_model
    rng = np.random.default_rng(23)
    q, k, v, pool, tables, slots, lens = _batch(rng, [4, 1], [3, 9])
    pool8 = quantize_kv_rows(pool, _CODES[kind][1])
    (out8,) = quantized.run(q, k, v, pool8, tables, slots, lens)
    (out,) = model.run(q, k, v, pool, tables, slots, lens)
    values = dequantize_kv_rows(pool8)
    top = np.abs(pool).max(axis=-1, keepdims=True)
    if kind == "int8":
        bound = top / 254
    else:
        bound = np.maximum(np.abs(pool) / 16, top / 448 * 2.0 ** -10)
    assert (np.abs(values - pool) <= bound * (1 + 1e-5)).all()
    live = (slots >= 0)[:, None, :, None].repeat(HQ, 1).repeat(D, 3)
    assert np.abs(out8 - out)[live].max() < (0.05 if kind == "int8" else 0.2)


# sits-gpu-pipeline's tensor-level passes (see test_gpu_tiling_on_cpu.py),
# staged tiles in the default memory space: exact sequential code.
_GPU_TILING = ("builtin.module(sits-graph-pipeline,sits-convert-to-linalg,canonicalize,cse,"
               "func.func(convert-elementwise-to-linalg,sits-gpu-materialize-copies,"
               "sits-cpu-fuse-elementwise),canonicalize,cse,"
               "func.func(sits-gpu-tile-and-fuse,"
               "sits-gpu-promote-operands{workgroup-memory=false}),canonicalize,cse,"
               "func.func(sits-gpu-vectorize),canonicalize,cse)")


def _static_ir(batch: int, width: int, max_blocks: int) -> str:
    """_IR with the batch's extents static (the GPU tiling tiles statically
    shaped ops; the pool's block count stays dynamic)."""
    return (_IR.replace(f"tensor<?x{HQ}x?x{D}xf32>", f"tensor<{batch}x{HQ}x{width}x{D}xf32>")
               .replace(f"tensor<?x{HKV}x?x{D}xf32>", f"tensor<{batch}x{HKV}x{width}x{D}xf32>")
               .replace("tensor<?x?xi32>", f"tensor<{batch}x{max_blocks}xi32>")
               .replace("tensor<?x?xi64>", f"tensor<{batch}x{width}xi64>")
               .replace("tensor<?xi32>", f"tensor<{batch}xi32>"))


@pytest.mark.parametrize("target", ["h100", "mi300x"])
@pytest.mark.parametrize("news,pasts", [([3, 2, 1], [2, 7, 2]), ([1, 1, 1, 1], [0, 4, 9, 14])])
def test_gpu_tiling_matches_reference(tmp_path, target, news, pasts):
    """The GPU lowering of sits.paged_attention (slot writes, the gather of
    each sequence's blocks through its table, attention tiled over blocks
    and threads for the target), lowered for the CPU, against the
    reference."""
    from sits_mlir import passmanager
    from sits_mlir.dialects import sits

    rng = np.random.default_rng(sum(news) * 17 + len(pasts))
    q, k, v, pool, tables, slots, lens = _batch(rng, news, pasts)
    with ir.Context():
        module = ir.Module.parse(_static_ir(len(news), max(news), tables.shape[1]))
        module.operation.attributes["sits.target"] = sits.TargetAttr.get(target)
        passmanager.PassManager.parse(_GPU_TILING).run(module.operation)
        text = str(module)
        assert "#gpu.block<" in text and "#gpu.thread<" in text
        assert "sits.ukernel" not in text
        model = sits_mlir.compile(module, "cpu", tmp_path / "pa.sitsm", threads=1).load()
    ref_out, ref_pool = _reference(q, k, v, pool, tables, slots, lens)
    (out,) = model.run(q, k, v, pool, tables, slots, lens)
    np.testing.assert_array_equal(pool, ref_pool)
    real = ~np.isnan(ref_out)
    np.testing.assert_allclose(out[real], ref_out[real], rtol=1e-5, atol=1e-5)
    assert np.isfinite(out).all()
