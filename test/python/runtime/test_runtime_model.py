"""sits_mlir.runtime: loading compiled models and running them from Python."""

import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from sits_mlir import runtime
from sits_mlir.errors import SitsError
from runtime_helpers import ADD_ENTRY, arg

ASYNC_ENTRY = {
    "name": "main",
    "args": [arg("input", "x", "f32", [-1], ["n"]),
             arg("input", "y", "f32", [-1], ["n"]),
             arg("output", "z", "f32", [-1], ["n"]),
             arg("output", "threads", "i64", [1])],
}
WEIGHTS_ENTRY = {
    "name": "main",
    "args": [arg("weights", "weights", "i8", [16]),
             arg("input", "x", "f32", [4]),
             arg("output", "y", "f32", [4])],
}
SCALE_ENTRY = {
    "name": "scale",
    "args": [arg("input", "x", "f32", [-1]), arg("output", "out", "f32", [-1])],
}


@pytest.fixture
def add_model(make_artifact):
    return runtime.load(make_artifact("add", [ADD_ENTRY, SCALE_ENTRY]))


def test_load_describes_the_model(add_model, make_artifact):
    m = add_model
    assert m.device == "cpu"
    assert list(m.entry_points) == ["main", "scale"]
    assert [str(s) for s in m.inputs] == ["x: f32[?, 4]", "y: f32[?, 4]"]
    assert m.outputs[0].name == "z"
    assert m.outputs[0].shape == (None, 4)
    assert m.outputs[0].dim_names == ("batch", None)
    assert m.outputs[0].numpy_dtype == np.float32
    assert m.manifest["format_version"] == runtime.FORMAT_VERSION
    assert m.manifest["target"]["name"] == "cpu"
    assert m.manifest["entry_points"][0]["symbol"] == "sits_entry_main"
    assert m.manifest["content_hash"] == m.content_hash
    assert "main" in repr(m) and "cpu" in repr(m)
    assert repr(m.entry("scale")) == "<EntryPoint scale(x: f32[?]) -> (out: f32[?])>"


def test_run_with_numpy(add_model):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.full((3, 4), 0.5, dtype=np.float32)
    z = add_model(x, y)
    np.testing.assert_array_equal(z, x + y)
    assert z.dtype == np.float32 and z.shape == (3, 4)
    assert z.ctypes.data % 64 == 0, "outputs are 64-byte aligned"
    assert z.flags.writeable
    # By name, mixed, run() always gives a tuple.
    (z2,) = add_model.run(x, y=y)
    np.testing.assert_array_equal(z2, z)
    np.testing.assert_array_equal(add_model(y=y, x=x), z)


def test_inputs_that_need_staging(add_model):
    base = np.arange(64, dtype=np.float32)
    x = base[1:9].reshape(2, 4)  # misaligned
    y = np.arange(16, dtype=np.float32).reshape(4, 4)[::2]  # strided rows
    t = np.arange(8, dtype=np.float32).reshape(4, 2).T  # transposed
    np.testing.assert_array_equal(add_model(x, y), x + y)
    np.testing.assert_array_equal(add_model(t, t), 2 * t)
    ro = np.frombuffer(np.arange(8, dtype=np.float32).tobytes(), dtype=np.float32).reshape(2, 4)
    assert not ro.flags.writeable
    np.testing.assert_array_equal(add_model(ro, ro), 2 * ro)


def test_lists_and_scalars_take_the_input_dtype(add_model):
    z = add_model([[1, 2, 3, 4]], [[0.5, 0.5, 0.5, 0.5]])
    np.testing.assert_array_equal(z, [[1.5, 2.5, 3.5, 4.5]])
    with pytest.raises(runtime.SignatureError, match="must be an array"):
        add_model(object(), [[1, 2, 3, 4]])
    with pytest.raises(runtime.SignatureError, match="must be an array"):
        add_model(["a", "b", "c", "d"], [[1, 2, 3, 4]])
    with pytest.raises(runtime.SignatureError, match="has dtype object"):
        add_model(np.array([[None] * 4]), [[1, 2, 3, 4]])


def test_scalar_outputs(make_artifact):
    m = runtime.load(make_artifact("sum", [{
        "name": "main", "args": [arg("input", "x", "f32", [-1]),
                                 arg("output", "total", "f32", []),
                                 arg("output", "count", "i64", [])]}]))
    total, count = m(np.arange(5, dtype=np.float32))
    assert total.shape == () and total.dtype == np.float32 and float(total) == 10.0
    assert count.shape == () and int(count) == 5
    total, count = m([])
    assert float(total) == 0.0 and int(count) == 0


class DLPackOnly:
    """A tensor that offers nothing but the DLPack protocol."""

    def __init__(self, array):
        self._a = array

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_inputs(add_model):
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    d = DLPackOnly(x)
    assert not hasattr(d, "__array__")
    np.testing.assert_array_equal(add_model(d, d), 2 * x)
    # And the outputs are DLPack producers themselves.
    z = add_model(x, x)
    np.testing.assert_array_equal(np.from_dlpack(z), 2 * x)


def test_torch_tensors_if_available(add_model):
    torch = pytest.importorskip("torch")
    x = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    z = add_model(x, x)
    np.testing.assert_array_equal(z, 2 * x.numpy())
    with pytest.raises(runtime.SignatureError, match="dtype f64, expected f32"):
        add_model(x.double(), x)


def test_run_into_preallocated_outputs(add_model):
    x = np.ones((2, 4), np.float32)
    out = np.zeros((2, 4), np.float32)
    (res,) = add_model.run_into([out], x, x)
    assert res is out
    np.testing.assert_array_equal(out, 2 * x)
    big = np.zeros((2, 8), np.float32)
    add_model.run_into([big[:, ::2]], x, x)  # a strided output view
    np.testing.assert_array_equal(big[:, ::2], 2 * x)
    np.testing.assert_array_equal(big[:, 1::2], 0)
    ro = np.zeros((2, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(runtime.SignatureError, match="read-only"):
        add_model.run_into([ro], x, x)
    with pytest.raises(runtime.SignatureError, match=r"output 'z'.*shape \[3, 4\]"):
        add_model.run_into([np.zeros((3, 4), np.float32)], x, x)


def test_output_shapes_and_unsized_dynamic_outputs(add_model):
    x = np.ones((5, 4), np.float32)
    assert add_model.entry("main").output_shapes(x, x) == [(5, 4)]
    scale = add_model.entry("scale")
    with pytest.raises(runtime.SignatureError, match="no input determines dimension 0"):
        scale(np.ones(3, np.float32))
    out = np.empty(3, np.float32)
    scale.run_into([out], np.ones(3, np.float32))
    np.testing.assert_array_equal(out, 2)


def test_entry_selection(add_model):
    np.testing.assert_array_equal(add_model.entry("scale").run_into(
        [np.empty(2, np.float32)], [1, 2])[0], [2, 4])
    with pytest.raises(runtime.RuntimeCoreError, match="the model has: main, scale"):
        add_model.entry("nope")


# -- signature errors: count, shape, dtype, with expected vs given -------------

def test_wrong_input_count(add_model):
    x = np.ones((2, 4), np.float32)
    with pytest.raises(runtime.SignatureError) as e:
        add_model(x)
    assert "missing input 'y' (inputs: x, y)" in str(e.value)
    assert e.value.subject == "y"
    with pytest.raises(runtime.SignatureError) as e:
        add_model(x, x, x)
    assert "takes 2 inputs (x, y), got 3" in str(e.value)
    assert (e.value.expected, e.value.given) == ("2", "3")
    with pytest.raises(runtime.SignatureError, match="no input named 'w'"):
        add_model(x, x, w=x)
    with pytest.raises(runtime.SignatureError, match="given twice"):
        add_model(x, x, x=x)
    # TypeError- and ValueError-like.
    with pytest.raises(TypeError):
        add_model(x)
    with pytest.raises(ValueError):
        add_model(x)


def test_wrong_dtype(add_model):
    x = np.ones((2, 4), np.float32)
    with pytest.raises(runtime.SignatureError) as e:
        add_model(x, x.astype(np.int32))
    assert str(e.value) == "input 'y' (#1) of entry point 'main' has dtype i32, expected f32"
    assert (e.value.subject, e.value.index) == ("y", 1)
    assert (e.value.expected, e.value.given) == ("f32", "i32")
    assert e.value.code == "SignatureMismatch"
    assert isinstance(e.value, SitsError)
    with pytest.raises(runtime.SignatureError, match="unsupported element type complex64"):
        add_model(x.astype(np.complex64), x)


def test_wrong_shape(add_model):
    x = np.ones((2, 4), np.float32)
    with pytest.raises(runtime.SignatureError) as e:
        add_model(np.ones((2, 3), np.float32), x)
    assert "has shape [2, 3], expected [?, 4] (dimension 1 must be 4)" in str(e.value)
    assert (e.value.expected, e.value.given) == ("[?, 4]", "[2, 3]")
    with pytest.raises(runtime.SignatureError, match=r"rank 1\), expected \[\?, 4\] \(rank 2\)"):
        add_model(np.ones(4, np.float32), x)
    with pytest.raises(runtime.SignatureError, match="'batch'\\) is 3 but 'x' has batch = 2"):
        add_model(x, np.ones((3, 4), np.float32))


# -- weights, threads, the GIL -----------------------------------------------

def test_weights_reach_the_code(make_artifact):
    w = np.array([2.0, 3.0, 0.5, -1.0], np.float32)
    path = make_artifact("weights", [WEIGHTS_ENTRY], weights=w)  # any buffer
    m = runtime.load(path)
    assert m.entry("main").has_weights
    assert [s.name for s in m.inputs] == ["x"]
    x = np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_array_equal(m(x), x * w + w)
    info = runtime.read_artifact(path)
    assert info.sections["weights"][0] % 4096 == 0
    assert info.sections["weights"][1] == 16


def test_async_code_uses_the_thread_pool(make_artifact):
    m = runtime.load(make_artifact("async_add", [ASYNC_ENTRY]))
    x = np.arange(1 << 16, dtype=np.float32)
    try:
        for n in (1, 2, 3):
            runtime.set_num_threads(n)
            assert runtime.num_threads() == n
            z, threads = m(x, x)
            np.testing.assert_array_equal(z, 2 * x)
            assert 1 <= threads[0] <= n
    finally:
        runtime.set_num_threads(0)
    assert runtime.num_threads() == runtime.default_num_threads()
    with pytest.raises(runtime.RuntimeCoreError, match="thread count"):
        runtime.set_num_threads(-3)


def test_gil_is_released_while_code_runs(make_artifact):
    m = runtime.load(make_artifact("slow", [{
        "name": "main",
        "args": [arg("input", "seconds", "f64", [1]), arg("output", "out", "f64", [1])]}]))
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.005)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        time.sleep(0.02)
        before = len(ticks)
        start = time.perf_counter()
        out = m(np.array([0.5]))
        elapsed = time.perf_counter() - start
        during = [s for s in ticks if start <= s <= start + elapsed]
    finally:
        stop.set()
        t.join()
    assert out[0] == 0.5 and elapsed >= 0.45
    assert len(during) >= 20, f"the other thread ticked {len(during)} times in {elapsed:.2f}s"
    assert len(ticks) > before


def test_models_run_from_many_python_threads(make_artifact):
    m = runtime.load(make_artifact("async_add", [ASYNC_ENTRY]))
    errors = []

    def work(k):
        try:
            x = np.full(10000 + k, float(k), np.float32)
            for _ in range(20):
                z, _ = m(x, x)
                assert z[-1] == 2 * k
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_bf16_arguments_travel_as_bits(make_artifact):
    entry = {"name": "main", "args": [arg("input", "x", "bf16", [-1, 4], ["b", None]),
                                      arg("input", "y", "bf16", [-1, 4], ["b", None]),
                                      arg("output", "z", "bf16", [-1, 4], ["b", None])]}
    m = runtime.load(make_artifact("add", [entry]))
    spec = m.inputs[0].numpy_dtype
    assert spec == np.uint16 or spec.name == "bfloat16"
    # numpy has no bfloat16: uint16 arrays carry the bits (ml_dtypes arrays
    # are passed the same way). Only the signature check runs here.
    bits = np.zeros((2, 4), np.uint16)
    assert m.entry("main").output_shapes(bits, bits) == [(2, 4)]
    try:
        import ml_dtypes

        b = np.zeros((2, 4), ml_dtypes.bfloat16)
        assert m.entry("main").output_shapes(b, b) == [(2, 4)]
    except ImportError:
        pass
    with pytest.raises(runtime.SignatureError, match="dtype f16, expected bf16"):
        m.entry("main").output_shapes(bits.astype(np.float16), bits)


def test_the_runtime_needs_no_mlir():
    code = ("import sys; import sits_mlir.runtime as r; r.host_cpu(); "
            "bad = [m for m in sys.modules if m.startswith('sits_mlir._mlir_libs')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_async_abi_becomes_global_when_code_is_loaded(make_artifact):
    # Python opens extension modules RTLD_LOCAL, so libSitsRuntime (the
    # extension's dependency) starts out invisible to later dlopens; the
    # runtime promotes itself to the global scope before loading code.
    path = make_artifact("async_add", [ASYNC_ENTRY])
    code = f"""
import ctypes, numpy as np
import sits_mlir.runtime as rt
glob = ctypes.CDLL(None)
before = hasattr(glob, "mlirAsyncRuntimeExecute")
m = rt.load({str(path)!r})
after = hasattr(glob, "mlirAsyncRuntimeExecute")
z, _ = m(np.ones(100, np.float32), np.ones(100, np.float32))
assert (before, after) == (False, True), (before, after)
assert z.sum() == 200
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_devices():
    uris = [d["uri"] for d in runtime.devices()]
    assert "cpu" in uris
    assert runtime.open_device("cpu")[0] == "cpu"
    with pytest.raises(runtime.DeviceError) as e:
        runtime.open_device("tpu:0")
    assert "known schemes: cpu, cuda, hip" in str(e.value)
    try:
        runtime.open_device("cuda:0")
    except runtime.DeviceError as e:
        assert "CUDA" in str(e)
    with pytest.raises(runtime.RuntimeCoreError, match="malformed device URI"):
        runtime.open_device("cuda:zero")


def test_list_inputs_never_change_kind(make_artifact):
    m = runtime.load(make_artifact("sum", [{
        "name": "main", "args": [arg("input", "x", "i32", [-1]),
                                 arg("output", "total", "f32", []),
                                 arg("output", "count", "i64", [])]}]))
    with pytest.raises(runtime.SignatureError, match="float64 values that do not convert to i32"):
        m([1.5, 2.5])
    assert int(m([1, 2, 3])[1]) == 3
