"""The KV memory (sits_mlir.runtime.kv.KVMemory): the pools as NumPy and
DLPack views of the documented shape and dtype, their lifetime, the size and
allocation errors, and that the allocator's copies (CoW, swap, offload,
onboarding) carry the KV contents with the blocks."""

from __future__ import annotations

import copy
import gc
import pickle
import random

import ml_dtypes
import numpy as np
import pytest

from sits_mlir.runtime import kv

SMALL = dict(block_size=4, num_layers=2, num_kv_heads=2, head_dim=4, dtype="f32",
             max_seq_len=1 << 16)


def memory(**fields) -> kv.KVMemory:
    return kv.KVMemory(**{**SMALL, **fields})


# --- shapes, dtypes, layout --------------------------------------------------------------------


@pytest.mark.parametrize("dtype,np_dtype", [
    ("f32", np.float32), ("f16", np.float16), ("bf16", ml_dtypes.bfloat16),
    ("fp8_e4m3", ml_dtypes.float8_e4m3fn), ("fp8_e5m2", ml_dtypes.float8_e5m2),
    ("int8", np.int8)])
def test_views_have_the_documented_shape_and_dtype(dtype, np_dtype):
    m = memory(num_blocks=8, num_host_blocks=3, dtype=dtype)
    assert m.dtype == np.dtype(np_dtype)
    assert m.device.shape == (8, 2, 2, 2, 4, 4)  # [blocks, layers, kv, heads, bs, head_dim]
    assert m.host.shape == (3, 2, 2, 2, 4, 4)
    assert m.device.dtype == np.dtype(np_dtype) and m.device.flags.c_contiguous
    assert m.device.flags.writeable
    geometry = m.config.validate()
    assert m.device.nbytes == geometry["total_bytes"] == 8 * geometry["bytes_per_block"]
    assert m.host.nbytes == geometry["host_total_bytes"]
    assert not m.device.view(np.uint8).any() and not m.host.view(np.uint8).any()  # zero-filled


def test_layout_strides_match_the_views():
    m = memory(num_blocks=8)
    lay = m.layout
    assert lay["block_shape"] == (2, 2, 2, 4, 4)
    assert (lay["block_stride"], lay["layer_stride"], lay["kv_stride"], lay["head_stride"],
            lay["token_stride"], lay["elem_size"]) == (512, 256, 128, 64, 16, 4)
    assert lay["bytes_per_block"] == m.config.validate()["bytes_per_block"]
    assert m.device.strides[:5] == (512, 256, 128, 64, 16)
    # Block b of layer l, as a kernel addresses it.
    m.device[5, 1, 1, 0, 2, 3] = 7.0
    raw = np.frombuffer(m.device, np.uint8)
    at = 5 * 512 + 256 + 128 + 0 * 64 + 2 * 16 + 3 * 4
    assert raw[at:at + 4].view(np.float32)[0] == 7.0


def test_pools_are_aligned_and_views_are_zero_copy():
    m = memory(num_blocks=16, num_host_blocks=4)
    for tier in ("device", "host"):
        ptr = m.data_ptr(tier)
        assert ptr % 4096 == 0
        assert m.view(tier).__array_interface__["data"][0] == ptr
        info = m.backend(tier)
        assert info["name"] == "host" and info["host_accessible"]
        assert info["dlpack_device"] == (1, 0) and ptr % info["alignment"] == 0
    a, b = m.device, m.device
    a[3] = 1.5
    assert (b[3] == 1.5).all()


def test_no_host_tier_gives_an_empty_view():
    m = memory(num_blocks=4)
    assert m.host.shape == (0, 2, 2, 2, 4, 4)
    assert m.data_ptr("host") == 0
    with pytest.raises(kv.KVInvalidArgument, match="tier"):
        m.view("gpu")


def test_construct_from_an_allocator_or_a_config():
    a = kv.KVAllocator(num_blocks=8, **SMALL)
    assert kv.KVMemory(a).config == a.config
    assert kv.KVMemory(a.config, num_blocks=4).layout["num_blocks"] == 4
    assert "KVMemory(dtype=f32" in repr(kv.KVMemory(a))


# --- lifetime ----------------------------------------------------------------------------------


def test_views_keep_the_memory_alive():
    m = memory(num_blocks=8, num_host_blocks=2)
    dev, host, raw = m.device, m.host, m.dlpack()
    dev[1] = 3.0
    m.close()
    assert m.closed
    with pytest.raises(kv.InvalidState, match="CLOSED"):
        m.device
    del m
    gc.collect()
    assert (dev[1] == 3.0).all()  # still mapped
    dev[2] = 4.0
    host[:] = 1.0
    assert raw is not None


def test_context_manager_closes():
    with memory(num_blocks=4) as m:
        view = m.device
    assert m.closed
    view[:] = 2.0


def test_copying_and_pickling_are_refused():
    m = memory(num_blocks=4)
    for fn in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError):
            fn(m)


# --- errors ------------------------------------------------------------------------------------


def test_bad_config_names_the_field():
    with pytest.raises(kv.KVInvalidArgument) as e:
        memory(num_blocks=8, num_layers=0)
    assert e.value.field == "num_layers"


def test_size_overflow_is_an_error():
    with pytest.raises(kv.KVInvalidArgument) as e:
        memory(num_blocks=8, num_layers=1 << 20, num_kv_heads=1 << 20, head_dim=1 << 20)
    assert e.value.field == "bytes_per_block"
    with pytest.raises(kv.KVInvalidArgument) as e:
        memory(num_blocks=1 << 30, num_layers=1 << 20, head_dim=1 << 14)
    assert e.value.field == "total_bytes"
    with pytest.raises(kv.KVInvalidArgument) as e:
        memory(num_blocks=8, num_host_blocks=1 << 30, num_layers=1 << 20, head_dim=1 << 14)
    assert e.value.field == "host_total_bytes"


def test_allocation_failure_is_out_of_memory_with_the_bytes():
    # 2^30 blocks of 2^23 bytes: beyond any address space.
    big = dict(num_layers=1, num_kv_heads=1, head_dim=1 << 16, block_size=16)
    with pytest.raises(kv.KVOutOfMemory) as e:
        memory(num_blocks=1 << 30, **big)
    assert isinstance(e.value, MemoryError)
    assert e.value.requested == 1 << 53 and e.value.field == "device_tier"
    assert "device_tier" in str(e.value)
    with pytest.raises(kv.KVOutOfMemory) as e:
        memory(num_blocks=4, num_host_blocks=1 << 30, **big)
    assert e.value.field == "host_tier"


def test_bad_copies_copy_nothing():
    m = memory(num_blocks=8, num_host_blocks=2)
    m.device[1:] = np.arange(7, dtype=np.float32)[:, None, None, None, None, None]
    before = m.device.copy()
    good = kv.BlockCopy(0, "device", 1, "device", 2, 4)
    for bad, field in [((0, "device", 8, "device", 2, 4), "src"),
                       ((0, "device", 1, "host", 2, 4), "dst"),
                       ((0, "device", 1, "device", 0, 4), "dst"),  # the null block
                       ((0, "device", 1, "device", 2, 5), "tokens")]:
        with pytest.raises(kv.KVInvalidArgument) as e:
            m.apply_copies([good, bad])
        assert e.value.field == field and e.value.batch_index == 1
    for bad in [(0, "gpu", 1, "device", 2, 4), (0, "device", 1), "nope", None]:
        with pytest.raises(kv.KVInvalidArgument):
            m.apply_copies([good, bad])
    np.testing.assert_array_equal(m.device, before)
    assert m.apply_copies([]) == 0
    assert m.apply_copies([good]) == 1
    np.testing.assert_array_equal(m.device[2], before[1])


def test_partial_copy_moves_the_valid_prefix_of_every_tile():
    m = memory(num_blocks=4, num_host_blocks=2)
    rng = np.random.default_rng(0)
    m.device[1] = rng.standard_normal(m.device[1].shape, dtype=np.float32)
    m.device[2] = -1.0
    m.apply_copies([(0, "device", 1, "device", 2, 3)])
    np.testing.assert_array_equal(m.device[2][..., :3, :], m.device[1][..., :3, :])
    assert (m.device[2][..., 3:, :] == -1.0).all()
    # Across tiers, in list order.
    m.apply_copies([(1, "device", 1, "host", 0, 4), (1, "host", 0, "device", 3, 4)])
    np.testing.assert_array_equal(m.host[0], m.device[1])
    np.testing.assert_array_equal(m.device[3], m.device[1])


def test_dlpack_shares_the_memory():
    torch = pytest.importorskip("torch")
    m = memory(num_blocks=4, dtype="bf16")
    t = torch.from_dlpack(m.dlpack())
    assert t.dtype == torch.bfloat16 and tuple(t.shape) == m.device.shape
    assert t.data_ptr() == m.data_ptr()
    t[2, 1, 0] = 2.5
    assert (m.device[2, 1, 0].astype(np.float32) == 2.5).all()
    assert torch.from_dlpack(m.dlpack("host")).shape[0] == 0


# --- quantized pools: int8 codes + an f32 scale per (token, head) row --------------------------

QSMALL = dict(SMALL, dtype="int8", quantization="per_token_head")


def qmemory(**fields) -> kv.KVMemory:
    return kv.KVMemory(**{**QSMALL, **fields})


def test_quantization_is_a_config_field():
    c = kv.PoolConfig(num_blocks=8, dtype="int8", quantization="per_token_head")
    assert c.quantization == "per_token_head" and "quantization" in c._fields
    assert "quantization='per_token_head'" in repr(c)
    assert c == kv.PoolConfig(**{f: getattr(c, f) for f in c._fields})
    assert c != c.replace(quantization="none")
    assert eval(repr(c), {"PoolConfig": kv.PoolConfig}) == c
    assert kv.PoolConfig(num_blocks=8).quantization == "none"  # the default
    d = kv.PoolConfig(num_blocks=8)
    d.quantization = "per_token_head"
    d.dtype = "int8"
    assert d == c
    with pytest.raises(kv.KVInvalidArgument, match="supported: none, per_token_head") as e:
        kv.PoolConfig(quantization="int4")
    assert e.value.field == "quantization"


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "fp8_e5m2"])
def test_per_token_head_needs_int8_or_fp8_e4m3(dtype):
    c = kv.PoolConfig(num_blocks=8, dtype=dtype, quantization="per_token_head")
    for make in (c.validate, lambda: kv.KVAllocator(c), lambda: kv.KVMemory(c)):
        with pytest.raises(kv.KVInvalidArgument,
                           match=f"dtype int8 or fp8_e4m3, not {dtype}") as e:
            make()
        assert e.value.field == "quantization"


@pytest.mark.parametrize("dtype", ["int8", "fp8_e4m3"])
def test_per_token_head_takes_int8_and_fp8_e4m3(dtype):
    c = kv.PoolConfig(num_blocks=8, dtype=dtype, quantization="per_token_head", **{
        k: v for k, v in SMALL.items() if k != "dtype"})
    assert c.validate()["bytes_per_block"] == 2 * 2 * 2 * 4 * (4 + 4)
    assert kv.KVAllocator(c).geometry["bytes_per_block"] == 256
    assert kv.KVMemory(c).layout["token_stride"] == 8


def test_quantized_geometry_counts_the_scales():
    a = kv.KVAllocator(num_blocks=8, num_host_blocks=3, **QSMALL)
    # kv 2 × 2 layers × 2 heads × block_size 4 × (head_dim 4 codes + 4 scale bytes).
    assert a.geometry["bytes_per_block"] == 2 * 2 * 2 * 4 * (4 + 4) == 256
    assert a.geometry["total_bytes"] == 8 * 256 and a.geometry["host_total_bytes"] == 3 * 256
    plain = a.config.replace(quantization="none").validate()
    assert plain["bytes_per_block"] == 128


@pytest.mark.parametrize("dtype,codes_dtype", [("int8", np.dtype(np.int8)),
                                               ("fp8_e4m3", np.dtype(ml_dtypes.float8_e4m3fn))])
def test_quantized_views_shapes_dtypes_and_strides(dtype, codes_dtype):
    m = qmemory(num_blocks=8, num_host_blocks=3, dtype=dtype)
    lay = m.layout
    assert lay["quantization"] == "per_token_head" and lay["dtype"] == dtype
    assert (lay["elem_size"], lay["scale_size"], lay["scale_offset"], lay["token_stride"],
            lay["head_dim"]) == (1, 4, 4, 8, 4)
    assert lay["block_shape"] == (2, 2, 2, 4, 8)
    assert (lay["block_stride"], lay["layer_stride"], lay["kv_stride"], lay["head_stride"]) \
        == (256, 128, 64, 32)
    # The raw rows in the pool's dtype: what a compiled model takes as
    # kv_pool (i8 / f8E4M3FN [..., head_dim + 4]).
    for tier, blocks in (("device", 8), ("host", 3)):
        raw = m.view(tier)
        assert raw.shape == (blocks, 2, 2, 2, 4, 4 + 4) and raw.dtype == codes_dtype
        assert raw.flags.c_contiguous and raw.flags.writeable
        codes, scales = m.codes(tier), m.scales(tier)
        assert codes.shape == (blocks, 2, 2, 2, 4, 4) and codes.dtype == codes_dtype
        assert scales.shape == (blocks, 2, 2, 2, 4) and scales.dtype == np.float32
        assert codes.strides == (256, 128, 64, 32, 8, 1)
        assert scales.strides == (256, 128, 64, 32, 8)
        assert codes.flags.writeable and scales.flags.writeable
        assert codes.__array_interface__["data"][0] == m.data_ptr(tier)
        assert scales.__array_interface__["data"][0] == m.data_ptr(tier) + 4
    assert m.device.shape == m.view("device").shape and m.dtype == codes_dtype
    if dtype == "int8":  # NumPy's DLPack cannot carry fp8 (see the torch test)
        t = np.from_dlpack(m.dlpack())  # the same raw rows through DLPack
        assert t.shape == m.device.shape and t.dtype == np.int8
        assert t.__array_interface__["data"][0] == m.data_ptr()
    assert m.device.nbytes == m.config.validate()["total_bytes"]
    assert m.codes().shape == m.codes("device").shape  # device by default
    # No host tier: empty views.
    e = qmemory(num_blocks=4, dtype=dtype)
    assert e.codes("host").shape == (0, 2, 2, 2, 4, 4) and e.codes("host").dtype == codes_dtype
    assert e.scales("host").shape == (0, 2, 2, 2, 4)
    with pytest.raises(kv.KVInvalidArgument, match="tier"):
        e.codes("gpu")


def test_codes_and_scales_write_the_same_memory():
    m = qmemory(num_blocks=8)
    codes, scales = m.codes(), m.scales()
    codes[5, 1, 0, 1, 3] = [1, -2, 3, -128]
    scales[5, 1, 0, 1, 3] = 0.25
    row = m.device[5, 1, 0, 1, 3]
    assert row[:4].tolist() == [1, -2, 3, -128]
    assert row[4:].view("<f4")[0] == 0.25  # little-endian f32 right after the codes
    raw = np.frombuffer(m.device, np.uint8)
    at = 5 * 256 + 128 + 0 * 64 + 32 + 3 * 8
    assert raw[at + 4:at + 8].view("<f4")[0] == 0.25
    assert (raw[:at] == 0).all() and (raw[at + 8:] == 0).all()  # nothing else written
    # Element = code × scale.
    values = m.codes()[5, 1, 0, 1, 3] * m.scales()[5, 1, 0, 1, 3]
    np.testing.assert_array_equal(values, [0.25, -0.5, 0.75, -32.0])
    # And the other way: writing the raw rows shows in the views.
    m.device[2, 0, 1, 0, 0, 4:] = np.array([-1.5], "<f4").view(np.int8)
    assert scales[2, 0, 1, 0, 0] == -1.5
    # Unaligned scales (head_dim not a multiple of 4) work too.
    odd = qmemory(num_blocks=4, head_dim=3)
    assert odd.layout["token_stride"] == 7 and odd.scales().strides[-1] == 7
    odd.scales()[1] = 2.0
    assert (odd.scales()[1] == 2.0).all() and not odd.codes().any()


def test_codes_and_scales_need_a_quantized_pool():
    for m in (memory(num_blocks=4), memory(num_blocks=4, dtype="int8")):
        for fn in (m.codes, m.scales):
            with pytest.raises(TypeError, match="per_token_head"):
                fn()


def test_quantized_views_keep_the_memory_alive():
    m = qmemory(num_blocks=4)
    codes, scales = m.codes(), m.scales()
    m.close()
    del m
    gc.collect()
    scales[1] = 3.0
    codes[1] = 7
    assert (scales[1] == 3.0).all() and (codes[1] == 7).all()


def test_quantized_copies_move_codes_and_scales():
    m = qmemory(num_blocks=6, num_host_blocks=2)
    rng = np.random.default_rng(1)
    m.codes()[1] = rng.integers(-128, 128, m.codes()[1].shape, dtype=np.int8)
    m.scales()[1] = rng.standard_normal(m.scales()[1].shape, dtype=np.float32)
    m.device[2] = -1  # every byte 0xFF
    m.apply_copies([(0, "device", 1, "device", 2, 3)])  # a 3-token CoW
    np.testing.assert_array_equal(m.codes()[2][..., :3, :], m.codes()[1][..., :3, :])
    np.testing.assert_array_equal(m.scales()[2][..., :3], m.scales()[1][..., :3])
    assert (m.device[2][..., 3:, :] == -1).all()  # slots past `tokens`: untouched
    # Full copies across tiers, and a partial swap.
    m.apply_copies([(1, "device", 1, "host", 1, 4), (1, "host", 1, "device", 4, 4),
                    (1, "device", 1, "host", 0, 1)])
    np.testing.assert_array_equal(m.host[1], m.device[1])
    np.testing.assert_array_equal(m.device[4], m.device[1])
    np.testing.assert_array_equal(m.scales("host")[0][..., :1], m.scales()[1][..., :1])
    assert not m.host[0][..., 1:, :].any()


def test_quantized_scales_follow_cow_and_swap():
    a = kv.KVAllocator(num_blocks=12, num_host_blocks=8, **QSMALL)
    m = kv.KVMemory(a)
    codes, scales = m.codes(), m.scales()
    bs = a.config.block_size

    def write(seq, start, stop, base):
        for pos, slot in zip(range(start, stop), a.slot_mapping(seq, start, stop - start)):
            codes[slot // bs, ..., slot % bs, :] = (base + pos) % 100
            scales[slot // bs, ..., slot % bs] = base + pos + 0.5

    def check(seq, n, base):
        table = a.block_table(seq)
        for pos in range(n):
            b, t = table[pos // bs], pos % bs
            assert (codes[b, ..., t, :] == (base + pos) % 100).all(), (seq, pos)
            assert (scales[b, ..., t] == base + pos + 0.5).all(), (seq, pos)

    a.add_sequence(1, list(range(100, 110)))  # 3 blocks, tail of 2
    write(1, 0, 10, 0)
    a.fork(1, 2)
    r = a.append(2, [7])  # the child writes first: CoW of the 2-token tail
    assert len(r.copies) == 1 and r.copies[0].tokens == 2
    m.apply_copies(a.take_pending_copies())
    check(2, 10, 0)
    write(2, 10, 11, 0)
    check(1, 10, 0)
    check(2, 11, 0)
    a.swap_out(1)
    m.apply_copies(a.take_pending_copies())
    a.add_sequence(3, list(range(500, 520)))  # takes the freed blocks
    m.apply_copies(a.take_pending_copies())
    write(3, 0, 20, 50)
    a.free(3)
    a.swap_in(1)
    m.apply_copies(a.take_pending_copies())
    check(1, 10, 0)
    check(2, 11, 0)
    a.check_invariants()


# --- quantized pools with FP8 E4M3FN codes --------------------------------------------------


def test_fp8_quantized_dlpack_is_the_raw_rows():
    torch = pytest.importorskip("torch")
    m = qmemory(num_blocks=4, dtype="fp8_e4m3")
    t = torch.from_dlpack(m.dlpack())
    assert t.dtype == torch.float8_e4m3fn and tuple(t.shape) == m.device.shape
    assert t.data_ptr() == m.data_ptr()
    m.codes()[1, 0, 1, 0, 2] = np.array([1.5, -448, 0.001953125, 0], np.float32)
    np.testing.assert_array_equal(t[1, 0, 1, 0, 2, :4].float().numpy(),
                                  [1.5, -448, 0.001953125, 0])


def test_fp8_codes_and_scales_write_the_same_memory():
    m = qmemory(num_blocks=8, dtype="fp8_e4m3")
    codes, scales = m.codes(), m.scales()
    codes[5, 1, 0, 1, 3] = np.array([1.0, -3.0, 448.0, 2.0 ** -9], np.float32)
    scales[5, 1, 0, 1, 3] = 0.25
    raw = np.frombuffer(m.device, np.uint8)
    at = 5 * 256 + 128 + 0 * 64 + 32 + 3 * 8
    # E4M3FN bits: 1.0 = 0x38, -3.0 = 0xC4, 448 = 0x7E, 2^-9 = 0x01 (subnormal).
    assert raw[at:at + 4].tolist() == [0x38, 0xC4, 0x7E, 0x01]
    assert raw[at + 4:at + 8].view("<f4")[0] == 0.25  # little-endian f32 after the codes
    assert (raw[:at] == 0).all() and (raw[at + 8:] == 0).all()  # nothing else written
    # Element = code × scale.
    values = codes[5, 1, 0, 1, 3].astype(np.float32) * scales[5, 1, 0, 1, 3]
    np.testing.assert_array_equal(values, [0.25, -0.75, 112.0, 2.0 ** -11])
    # The raw rows: the codes as elements, the scale's bytes as 4 more.
    row = m.device[5, 1, 0, 1, 3]
    assert row[:4].astype(np.float32).tolist() == [1.0, -3.0, 448.0, 2.0 ** -9]
    assert row[4:].view(np.uint8).view("<f4")[0] == 0.25
    m.device[2, 0, 1, 0, 0, 4:] = np.array([-1.5], "<f4").view(ml_dtypes.float8_e4m3fn)
    assert scales[2, 0, 1, 0, 0] == -1.5
    odd = qmemory(num_blocks=4, head_dim=3, dtype="fp8_e4m3")
    assert odd.layout["token_stride"] == 7 and odd.scales().strides[-1] == 7
    odd.scales()[1] = 2.0
    assert (odd.scales()[1] == 2.0).all()
    assert not odd.codes().view(np.uint8).any()


def test_fp8_quantized_copies_move_codes_and_scales():
    m = qmemory(num_blocks=6, num_host_blocks=2, dtype="fp8_e4m3")
    rng = np.random.default_rng(2)
    codes = m.codes().view(np.uint8)  # the bits, NaN codes excluded
    codes[1] = rng.integers(0, 0x7F, codes[1].shape, dtype=np.uint8) | \
        rng.integers(0, 2, codes[1].shape, dtype=np.uint8) << 7
    m.scales()[1] = rng.standard_normal(m.scales()[1].shape, dtype=np.float32)
    m.device.view(np.uint8)[2] = 0xEE
    m.apply_copies([(0, "device", 1, "device", 2, 3)])  # a 3-token CoW
    np.testing.assert_array_equal(codes[2][..., :3, :], codes[1][..., :3, :])
    np.testing.assert_array_equal(m.scales()[2][..., :3], m.scales()[1][..., :3])
    assert (m.device.view(np.uint8)[2][..., 3:, :] == 0xEE).all()
    m.apply_copies([(1, "device", 1, "host", 1, 4)])
    np.testing.assert_array_equal(m.host.view(np.uint8)[1], m.device.view(np.uint8)[1])


# --- the contents follow the blocks ------------------------------------------------------------


class Kernel:
    """An allocator + its memory + what each live sequence's KV must read.
    The "kernel" writes a value per (token, position, layer, kv, head, d)
    through slot_mapping; prefix-cache hits hold the same content."""

    def __init__(self, **fields):
        self.a = kv.KVAllocator(**{**SMALL, **fields})
        self.m = kv.KVMemory(self.a)
        self.tokens: dict[int, list[int]] = {}
        self.swapped: set[int] = set()
        self.copies = 0
        lay = self.m.layout["block_shape"]
        self.offsets = np.arange(np.prod(lay[:3]) * lay[4], dtype=np.float32).reshape(
            lay[0], lay[1], lay[2], lay[4]) / 1024

    def value(self, token, pos):
        return np.float32(token * 64 + pos) + self.offsets

    def sync(self):
        copies = self.a.take_pending_copies()
        self.copies += self.m.apply_copies(copies)

    def write(self, seq, start, stop):
        if stop <= start:
            return
        bs, dev = self.a.config.block_size, self.m.device
        for pos, slot in zip(range(start, stop), self.a.slot_mapping(seq, start, stop - start)):
            dev[slot // bs, :, :, :, slot % bs, :] = self.value(self.tokens[seq][pos], pos)

    def check(self):
        bs, dev = self.a.config.block_size, self.m.device
        for seq, toks in self.tokens.items():
            if seq in self.swapped:
                continue
            table = self.a.block_table(seq)
            for pos, tok in enumerate(toks):
                got = dev[table[pos // bs], :, :, :, pos % bs, :]
                np.testing.assert_array_equal(got, self.value(tok, pos),
                                              err_msg=f"seq {seq} position {pos}")

    def add(self, seq, toks):
        r = self.a.add_sequence(seq, toks)
        self.tokens[seq] = list(toks)
        self.sync()
        self.write(seq, r.cached_tokens, len(toks))
        return r

    def append(self, seq, toks):
        r = self.a.append(seq, toks)
        start = len(self.tokens[seq])
        self.tokens[seq] += list(toks)
        self.sync()
        self.write(seq, start, len(self.tokens[seq]))
        return r

    def fork(self, parent, child, pos=-1):
        self.a.fork(parent, child, pos)
        self.tokens[child] = self.tokens[parent][:len(self.tokens[parent]) if pos < 0 else pos]

    def free(self, seq):
        self.a.free(seq)
        del self.tokens[seq]
        self.swapped.discard(seq)


def test_fork_then_write_copies_the_parents_tail():
    k = Kernel(num_blocks=16)
    k.add(1, list(range(100, 106)))  # blocks [1, 2]: the tail holds 2 tokens
    k.fork(1, 2)
    parent_tail = k.a.block_table(1)[1]
    before = k.m.device[parent_tail].copy()
    r = k.a.append(2, [7])  # the child writes first: copy-on-write
    assert len(r.copies) == 1 and r.copies[0].tokens == 2 and r.copies[0].src == parent_tail
    child_tail = r.copies[0].dst
    k.tokens[2].append(7)
    k.sync()
    # After the copy, before the kernel: the child's block holds the parent's tokens.
    np.testing.assert_array_equal(k.m.device[child_tail][..., :2, :],
                                  k.m.device[parent_tail][..., :2, :])
    k.write(2, 6, 7)
    np.testing.assert_array_equal(k.m.device[parent_tail], before)  # untouched
    k.check()
    k.append(1, [8, 9])  # the parent's tail is exclusive now: no copy
    assert k.copies == 1
    k.check()
    k.a.check_invariants()


def test_swap_out_and_in_carry_the_content():
    k = Kernel(num_blocks=12, num_host_blocks=8)
    k.add(1, list(range(100, 110)))  # 3 blocks, tail of 2
    k.fork(1, 2, 4)                  # block 1 shared
    k.a.swap_out(1)
    k.swapped.add(1)
    k.sync()
    assert k.copies == 2
    k.add(3, list(range(500, 540)))  # takes and overwrites the freed blocks
    k.check()
    k.free(3)
    k.a.swap_in(1)
    k.swapped.discard(1)
    k.sync()
    k.check()
    k.append(1, [1, 2, 3])
    k.check()
    k.a.check_invariants()


def test_eviction_offload_and_onboarding_carry_the_content():
    k = Kernel(num_blocks=5, num_host_blocks=8)  # 4 usable device blocks
    prompt = list(range(100, 110))
    k.add(1, prompt)
    k.free(1)                        # 2 sealed blocks cached
    k.add(2, list(range(700, 716)))  # every block: the cached ones are offloaded
    assert k.a.stats().offloads == 2
    k.check()
    k.free(2)
    r = k.add(3, prompt)             # served by the host tier: onboarded
    assert r.cached_tokens == 8 and r.num_onboarded == 2
    k.check()
    k.a.check_invariants()


def test_random_operations_keep_every_sequences_content():
    rng = random.Random(7)
    k = Kernel(num_blocks=20, num_host_blocks=10)
    next_id, ops = 1, 0
    for _ in range(300):
        live = sorted(k.tokens)
        resident = [s for s in live if s not in k.swapped]
        op = rng.randrange(9)
        try:
            if op <= 1 or not live:
                k.add(next_id, [rng.randint(1, 3) for _ in range(rng.randrange(12))])
                next_id += 1
            elif op <= 4 and resident:
                s = rng.choice(resident)
                k.append(s, [rng.randint(1, 3) for _ in range(rng.randint(1, 5))])
            elif op == 5 and resident:
                p = rng.choice(resident)
                k.fork(p, next_id, rng.randint(0, len(k.tokens[p])))
                next_id += 1
            elif op == 6:
                k.free(rng.choice(live))
            elif op == 7:
                s = rng.choice(live)
                if s in k.swapped:
                    k.a.swap_in(s)
                    k.swapped.discard(s)
                else:
                    k.a.swap_out(s)
                    k.swapped.add(s)
                k.sync()
            else:
                k.a.evict(rng.randint(1, 3))
                k.sync()
        except (kv.KVOutOfBlocks, kv.HostTierFull, kv.InvalidState):
            continue
        ops += 1
        k.check()
    k.a.check_invariants()
    assert ops > 200 and k.copies > 30


# --- KIVI blocks ---------------------------------------------------------------

def _kivi(dtype: str = "int4", **fields) -> kv.PoolConfig:
    return kv.PoolConfig(**{**dict(num_blocks=6, num_host_blocks=2, block_size=32, num_layers=2,
                                   num_kv_heads=2, head_dim=64, dtype=dtype, quantization="kivi"),
                            **fields})


@pytest.mark.parametrize("dtype, bytes_per_token_head", [("int4", 80), ("int2", 48)])
def test_kivi_geometry_counts_the_quantized_blocks(dtype, bytes_per_token_head):
    sizes = _kivi(dtype).validate()
    # K and V of 2 layers x 2 heads x 32 tokens: 80 bytes a token and head at
    # 4 bits (3.2x less than f16), 48 at 2 bits (5.3x), parameters included.
    assert sizes["bytes_per_block"] == 2 * 2 * 32 * bytes_per_token_head
    # The block's quantized part in whole pages, then a page-aligned f32 tail
    # per layer: a 64-byte header and [K, V][heads][32][64] floats.
    tail = -(-(64 + 2 * 2 * 32 * 64 * 4) // 4096) * 4096
    assert sizes["block_stride"] == -(-sizes["bytes_per_block"] // 4096) * 4096 + 2 * tail
    assert sizes["total_bytes"] == 6 * sizes["block_stride"]
    mem = kv.KVMemory(_kivi(dtype))
    assert mem.device.shape == (6, sizes["block_stride"]) and mem.device.dtype == np.int8
    assert mem.host.shape == (2, sizes["block_stride"])
    assert mem.layout["bytes_per_block"] == sizes["bytes_per_block"]
    shared = np.from_dlpack(mem.dlpack())
    assert shared.shape == (6, sizes["block_stride"]) and shared.dtype == np.int8
    assert shared.ctypes.data == mem.data_ptr()
    with pytest.raises(TypeError, match="quantized pool"):
        mem.codes()


def test_per_token_group_blocks_have_the_kivi_geometry():
    kivi, token = _kivi().validate(), _kivi(quantization="per_token_group").validate()
    assert kivi == token
    mem = kv.KVMemory(_kivi(quantization="per_token_group"))
    assert mem.layout["quantization"] == "per_token_group"
    assert mem.device.shape == (6, token["block_stride"])


@pytest.mark.parametrize("fields, field", [
    (dict(quantization="none"), "dtype"),
    (dict(dtype="int8"), "quantization"),
    (dict(kv_factor=1), "kv_factor"),
    (dict(head_dim=3), "head_dim"),
])
def test_kivi_needs_int4_or_int2_codes_and_whole_byte_rows(fields, field):
    with pytest.raises(kv.KVInvalidArgument) as info:
        _kivi(**fields).validate()
    assert info.value.field == field


def test_kivi_copies_carry_a_partial_blocks_tail():
    mem = kv.KVMemory(_kivi())
    sizes = mem.config.validate()
    part = sizes["bytes_per_block"]
    tail_at = -(-part // 4096) * 4096
    tail_layer = (sizes["block_stride"] - tail_at) // 2
    dev = mem.device
    rng = np.random.default_rng(0)
    dev[1, :part] = rng.integers(-128, 128, part, dtype=np.int8)
    for layer in range(2):
        at = tail_at + layer * tail_layer
        dev[1, at:at + 4] = np.frombuffer(np.int32(5).tobytes(), np.int8)
        rows = dev[1, at + 64:at + 64 + 2 * 2 * 32 * 64 * 4].view(np.float32)
        rows[:] = rng.standard_normal(rows.size, dtype=np.float32)
    # Copy-on-write of 3 of its 5 tail tokens into block 2, then swap out.
    mem.apply_copies([(0, "device", 1, "device", 2, 3), (0, "device", 1, "host", 0, 5)])
    assert np.array_equal(dev[2, :part], dev[1, :part])
    for layer in range(2):
        at = tail_at + layer * tail_layer
        assert int(dev[2, at:at + 4].view(np.int32)[0]) == 3
        assert int(mem.host[0, at:at + 4].view(np.int32)[0]) == 5
        src = dev[1, at + 64:].view(np.float32)[:2 * 2 * 32 * 64].reshape(4, 32, 64)
        dst = dev[2, at + 64:].view(np.float32)[:2 * 2 * 32 * 64].reshape(4, 32, 64)
        assert np.array_equal(dst[:, :3], src[:, :3]) and not dst[:, 3:].any()
