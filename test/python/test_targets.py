"""The known-target table, reached from Python."""

import pytest

from sits_mlir import ir, targets
from sits_mlir.dialects import sits


def test_table_has_every_product_target():
    assert targets.names() == ["h100", "h200", "a100", "v100", "mi300x", "x86-64", "x86-64-v2",
                               "x86-64-v3", "x86-64-v4", "aarch64", "cpu"]


@pytest.mark.parametrize("alias,name", [
    ("h100", "h100"), ("H100", "h100"), ("sm_90", "h100"), ("h100-sxm", "h100"),
    ("a100-sxm-80gb", "a100"), ("sm_80", "a100"), ("sm_70", "v100"),
    ("gfx942", "mi300x"), ("host", "cpu"), ("native", "cpu"), ("avx2", "x86-64-v3"),
    ("AVX512", "x86-64-v4"), ("x86_64", "x86-64"), ("arm64", "aarch64"),
])
def test_aliases(alias, name):
    assert targets.lookup(alias).name == name


def test_datasheet_figures():
    h100 = targets.lookup("h100")
    assert (h100.compute_units, h100.memory_gb, h100.memory_bandwidth_gbs) == (132, 80, 3350)
    assert h100.peak_tflops["bf16"] == 989 and h100.peak_tflops["fp8"] == 1979
    assert h100.fp8_formats == ("e4m3", "e5m2") and h100.min_ptx_version == 80
    assert "+ptx80" in h100.features
    a100 = targets.lookup("a100")
    assert a100.fp8_formats == () and a100.peak_tflops["fp8"] == 0
    mi300x = targets.lookup("mi300x")
    assert (mi300x.vendor, mi300x.simd_width, mi300x.chip) == ("amd", 64, "gfx942")
    assert targets.lookup("v100").shared_memory_per_unit_kb == 96


def test_host_cpu_is_detected():
    cpu = targets.lookup("cpu")
    assert cpu.vendor == "cpu" and not cpu.is_gpu
    assert cpu.compute_units >= 1 and cpu.memory_gb > 0
    assert cpu.triple.startswith(("x86_64", "aarch64"))


def _features(t):
    return {f for f in t.features.split(",") if f}


@pytest.mark.parametrize("name,lanes,registers,has,lacks", [
    ("x86-64", 4, 16, {"+sse2"}, {"+sse4.2", "+avx2"}),
    ("x86-64-v2", 4, 16, {"+sse4.2", "+popcnt"}, {"+avx2"}),
    ("x86-64-v3", 8, 16, {"+avx2", "+fma", "+f16c"}, {"+avx512bw"}),
    ("x86-64-v4", 16, 32, {"+avx2", "+avx512bw", "+avx512vl", "+avx512dq"}, set()),
    ("aarch64", 4, 32, {"+neon"}, {"+avx2"}),
])
def test_named_cpu_levels(name, lanes, registers, has, lacks):
    t = targets.lookup(name)
    assert (t.vendor, t.isa_level, t.simd_width, t.vector_registers) == \
        ("cpu", name, lanes, registers)
    assert has <= _features(t) and not lacks & _features(t)
    # An instruction set, not a machine: no cores, memory or peaks listed.
    assert t.compute_units == 0 and t.memory_gb == 0 and t.peak_tflops["f32"] == 0
    assert t.triple.startswith("aarch64" if name == "aarch64" else "x86_64")


def test_x86_levels_are_nested():
    levels = [_features(targets.lookup(n)) for n in ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")]
    for lower, higher in zip(levels, levels[1:]):
        assert lower < higher


def test_host_resolves_to_the_highest_level_it_includes():
    cpu = targets.lookup("cpu")
    assert cpu.isa_level in {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "aarch64"}
    level = targets.lookup(cpu.isa_level)
    host = _features(cpu)
    assert _features(level) <= host
    assert cpu.simd_width == level.simd_width and cpu.vector_registers == level.vector_registers
    # No higher level of the same family is included.
    if cpu.isa_level.startswith("x86-64"):
        order = ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"]
        for higher in order[order.index(cpu.isa_level) + 1:]:
            assert not _features(targets.lookup(higher)) <= host


def test_unknown_target():
    with pytest.raises(targets.UnknownTargetError, match="known targets: h100, h200"):
        targets.lookup("tpu-v5")


def test_target_attr(ctx):
    attr = sits.TargetAttr.get("gfx942")
    assert str(attr) == '#sits.target<"gfx942">'
    assert attr.info["name"] == "mi300x"
    with pytest.raises(ValueError, match="unknown target 'b200'"):
        sits.TargetAttr.get("b200")
    with pytest.raises(ir.MLIRError, match="unknown target 'b200'"):
        ir.Attribute.parse('#sits.target<"b200">')


def test_target_attr_of_a_named_cpu_level(ctx):
    attr = sits.TargetAttr.get("avx2")
    assert attr.info["name"] == "x86-64-v3" and attr.info["isa_level"] == "x86-64-v3"


def test_target_attr_on_module(ctx):
    m = ir.Module.create()
    m.operation.attributes["sits.target"] = sits.TargetAttr.get("a100")
    assert m.operation.verify()
    m.operation.attributes["sits.target"] = ir.StringAttr.get("a100")
    with pytest.raises(ir.MLIRError, match="must be a #sits.target attribute"):
        m.operation.verify()


@pytest.mark.slow
def test_host_figures_are_measured_once_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SITS_CACHE_DIR", str(tmp_path))
    first = targets.measure_host()
    assert first.source == "measured"
    # An sgemm on a few cores runs at more than 1 GFLOP/s and less than
    # 100 TFLOP/s; a parallel read streams between 0.5 GB/s and 10 TB/s.
    assert 1 < first.peak_fp32_gflops < 1e5
    assert 0.5 < first.bandwidth_gbs < 1e4
    cached = targets.measure_host()
    assert cached.source == "cache"
    assert (cached.peak_fp32_gflops, cached.bandwidth_gbs) == \
        (first.peak_fp32_gflops, first.bandwidth_gbs)
    assert targets.measure_host(refresh=True).source == "measured"
    # A corrupt cache file is measured over, never trusted.
    (cache_file,) = tmp_path.glob("host-*.json")
    cache_file.write_text("{not json")
    assert targets.measure_host().source == "measured"


def test_host_figures_without_a_writable_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SITS_CACHE_DIR", str(blocker / "cache"))
    figures = targets.measure_host()
    assert figures.source == "measured" and figures.peak_fp32_gflops > 0


def test_python_target_mirrors_the_field_list():
    """sits_mlir.targets.Target has exactly the fields of
    dialects/Target/TargetFields.def (peaks grouped in peak_tflops), and the
    native module fills each of them."""
    import dataclasses
    import re
    from pathlib import Path

    from sits_mlir._mlir_libs import _sits

    fields_def = Path(__file__).resolve().parents[2] / "dialects" / "Target" / "TargetFields.def"
    listed = re.findall(r"^SITS_TARGET_(\w+)\(\w+, (\w+)\)$", fields_def.read_text(), re.M)
    assert len(listed) > 20
    names = []
    for kind, py in listed:  # the peaks, together, where the first one is
        name = "peak_tflops" if kind == "PEAK" else py
        if name not in names:
            names.append(name)
    peaks = sorted(py for kind, py in listed if kind == "PEAK")
    assert [f.name for f in dataclasses.fields(targets.Target)] == names
    for entry in _sits.known_targets():
        assert sorted(entry) == sorted(names)
        assert sorted(entry["peak_tflops"]) == peaks
