"""The known-target table, reached from Python."""

import pytest

from sits_mlir import ir, targets
from sits_mlir.dialects import sits


def test_table_has_every_product_target():
    assert targets.names() == ["h100", "h200", "a100", "v100", "mi300x", "cpu"]


@pytest.mark.parametrize("alias,name", [
    ("h100", "h100"), ("H100", "h100"), ("sm_90", "h100"), ("h100-sxm", "h100"),
    ("a100-sxm-80gb", "a100"), ("sm_80", "a100"), ("sm_70", "v100"),
    ("gfx942", "mi300x"), ("host", "cpu"),
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


def test_target_attr_on_module(ctx):
    m = ir.Module.create()
    m.operation.attributes["sits.target"] = sits.TargetAttr.get("a100")
    assert m.operation.verify()
    m.operation.attributes["sits.target"] = ir.StringAttr.get("a100")
    with pytest.raises(ir.MLIRError, match="must be a #sits.target attribute"):
        m.operation.verify()


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
