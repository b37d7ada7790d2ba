"""The runtime's CUDA driver from Python, without a GPU.

The runtime is pointed at a test double of libcuda
(test/unit/runtime/fake_cuda, built here with the C++ compiler) through
$SITS_CUDA_DRIVER, so its real driver code runs: device listing, the primary
context, device buffers, copies both ways, module loading, kernel launches
through the mgpu* ABI, error mapping and teardown. The device registry reads
the variable once per process, so every case runs in a subprocess.

Hand-written host code (kernels/gpu_add.c) names a kernel the fake runs on
the host, so its results are real; compiled models' kernels cannot run
without a GPU, and their launches are checked against the manifest instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from sits_mlir import runtime
from runtime_helpers import KERNELS, ROOT, arg, host_triple

FAKE_SOURCE = ROOT / "test" / "unit" / "runtime" / "fake_cuda" / "fake_cuda.cpp"

GPU_ENTRY = {
    "name": "main",
    "args": [arg("weights", "weights", "i8", [16]),
             arg("input", "x", "f32", [-1, 4], ["rows", None]),
             arg("output", "z", "f32", [-1, 4], ["rows", None])],
}
UPDATE_ENTRY = {
    "name": "update",
    "args": [arg("weights", "weights", "i8", [16]),
             {**arg("input", "pool", "f32", [-1, 4], ["rows", None]), "updated_in_place": True},
             arg("input", "x", "f32", [-1, 4], ["rows", None]),
             arg("output", "z", "f32", [-1, 4], ["rows", None])],
}
WEIGHTS = np.array([1, 2, 3, 4], np.float32)


@pytest.fixture(scope="session")
def fake_cuda(tmp_path_factory) -> str:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        pytest.skip("no C++ compiler to build the fake CUDA driver")
    out = tmp_path_factory.mktemp("fake_cuda") / "libsits_fake_cuda.so"
    subprocess.run([cxx, "-std=c++17", "-shared", "-fPIC", "-O1", "-pthread", "-o",
                    str(out), str(FAKE_SOURCE)], check=True)
    return str(out)


@pytest.fixture
def gpu_add(tmp_path, kernels):
    """An artifact whose host code is kernels/gpu_add.c: z = x + 2 w."""
    path = tmp_path / "gpu_add.sitsm"
    manifest = {
        "target": {"triple": host_triple(), "cpu": "generic", "features": []},
        "device": {"kind": "cuda", "abi": "mlir-gpu-runtime", "chip": "sm_90",
                   "image_format": "bin"},
        "entry_points": [GPU_ENTRY, UPDATE_ENTRY],
    }
    runtime.write_artifact(path, manifest=manifest, code=kernels("gpu_add"),
                           weights=WEIGHTS.tobytes(), target="fake")
    return str(path)


# What every subprocess starts with: the runtime, and the fake's introspection
# (ctypes loads the very object the runtime dlopen'ed).
PRELUDE = """
import ctypes, gc, json, os, sys
import numpy as np
from sits_mlir import runtime
_path = os.environ["SITS_CUDA_DRIVER"]
fake = ctypes.CDLL(_path) if os.path.exists(_path) else None

def stats(fn=None):
    v = (ctypes.c_longlong * 10)()
    fake.sitsFakeCudaStats(fn.encode() if fn else None, v)
    keys = ["buffers", "modules", "streams", "contexts", "launches", "calls", "jit_opt",
            "to_device", "to_host", "release_threshold"]
    return dict(zip(keys, v))

def launches():
    out, name, dims = [], ctypes.create_string_buffer(256), (ctypes.c_uint * 7)()
    params, in_buffers = ctypes.c_int(), ctypes.c_int()
    while fake.sitsFakeCudaLaunch(len(out), name, 256, dims, ctypes.byref(params),
                                  ctypes.byref(in_buffers)) == 0:
        out.append({"name": name.value.decode(), "grid": list(dims[:3]),
                    "block": list(dims[3:6]), "smem": dims[6], "params": params.value,
                    "params_in_buffers": in_buffers.value})
    return out

def graph_stats():
    v = (ctypes.c_longlong * 5)()
    fake.sitsFakeCudaGraphStats(v)
    return dict(zip(["graphs", "instantiated", "graph_launches", "capturing", "pinned"], v))

def error(e):
    return {"type": type(e).__name__, "str": str(e),
            "mro": [c.__name__ for c in type(e).__mro__],
            **{k: getattr(e, k, None) for k in
               ("code", "subject", "function", "error_name", "error_code")}}
"""


def run_fake(fake_cuda: str, code: str, **env) -> dict:
    """Runs PRELUDE + `code` with the fake driver selected; returns the JSON
    the code prints last."""
    full_env = {**os.environ, "SITS_CUDA_DRIVER": fake_cuda, **env}
    full_env.pop("SITS_FAKE_CUDA_FAIL", None)
    full_env.update(env)
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                          capture_output=True, text=True, env=full_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def expected_sum(x):
    return x + 2 * WEIGHTS


def test_lists_and_opens_the_fake_device(fake_cuda):
    out = run_fake(fake_cuda, """
        devices = runtime.devices()
        print(json.dumps({"devices": devices, "open": runtime.open_device("cuda:0")}))
    """)
    assert {"uri": "cuda:0", "name": "SITS fake CUDA device 0", "kind": "cuda",
            "arch": "sm_90"} in out["devices"]
    assert out["open"] == ["cuda:0", "SITS fake CUDA device 0 (cuda:0, sm_90)"]


def test_runs_gpu_host_code_from_numpy_and_dlpack(fake_cuda, gpu_add):
    out = run_fake(fake_cuda, f"""
        model = runtime.load({gpu_add!r}, device="cuda:0")
        loaded = stats()
        fake.sitsFakeCudaReset()
        x = np.arange(20, dtype=np.float32).reshape(5, 4)
        z = model(x)
        ran = stats()
        # DLPack (a CPU tensor of another library, or numpy's own capsule).
        class Tensor:
            def __init__(self, a): self._a = a
            def __dlpack__(self, **kw): return self._a.__dlpack__(**kw)
            def __dlpack_device__(self): return self._a.__dlpack_device__()
        z_dlpack = model(Tensor(x[::-1]))
        first = launches()[0]
        del model; gc.collect()
        print(json.dumps({{"device": "cuda:0", "z": z.tolist(), "z_dlpack": z_dlpack.tolist(),
                          "loaded": loaded, "ran": ran, "first": first,
                          "after": stats()}}))
    """)
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    np.testing.assert_array_equal(out["z"], expected_sum(x))
    np.testing.assert_array_equal(out["z_dlpack"], expected_sum(x[::-1]))
    # The weights uploaded once at load; each call copies 80 bytes each way.
    assert (out["loaded"]["buffers"], out["loaded"]["modules"]) == (1, 1)
    assert out["loaded"]["to_device"] == 16
    assert (out["ran"]["to_device"], out["ran"]["to_host"]) == (80, 80)
    assert out["ran"]["launches"] == 2 and out["ran"]["buffers"] == 1
    assert out["first"] == {"name": "sits_fake_add_f32", "grid": [1, 1, 1],
                            "block": [128, 1, 1], "smem": 0, "params": 5,
                            "params_in_buffers": 3}
    # Torn down: no buffer, module, stream or context left.
    assert {k: out["after"][k] for k in ("buffers", "modules", "streams", "contexts")} == \
        {"buffers": 0, "modules": 0, "streams": 0, "contexts": 0}


def test_an_input_updated_in_place_comes_back_to_the_host(fake_cuda, gpu_add):
    """A paged KV pool is an input the code writes: the caller's array gets
    the device's contents back after the call."""
    out = run_fake(fake_cuda, f"""
        model = runtime.load({gpu_add!r}, device="cuda:0")
        fake.sitsFakeCudaReset()
        pool = np.zeros((3, 4), np.float32)
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        update = model.entry("update")
        z1 = update(pool, x)
        ran = stats()
        z2 = update(pool, x)  # recorded, then replayed
        z3 = update(pool, x)  # replayed
        try:  # the caller's array must be the buffer that is updated
            update(np.zeros((3, 8), np.float32)[:, ::2], x)
            strided = None
        except runtime.SignatureError as e:
            strided = str(e)
        print(json.dumps({{"pool": pool.tolist(), "z1": np.asarray(z1).tolist(),
                          "z2": np.asarray(z2).tolist(), "z3": np.asarray(z3).tolist(),
                          "strided": strided, "ran": ran, "gpu": model.gpu_stats()}}))
    """)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(out["pool"], 3 * x)
    np.testing.assert_array_equal(out["z1"], x + WEIGHTS)
    np.testing.assert_array_equal(out["z2"], 2 * x + WEIGHTS)
    np.testing.assert_array_equal(out["z3"], 3 * x + WEIGHTS)
    assert out["gpu"]["replays"] == 2
    # The first call: pool and x down, z and the pool back (48 bytes each).
    assert (out["ran"]["to_device"], out["ran"]["to_host"]) == (96, 96)
    assert "updated in place" in out["strided"]


@pytest.mark.parametrize("fail, error_type, function, name, code", [
    ("cuMemAllocAsync=2@3", "DeviceOutOfMemoryError", "cuMemAllocAsync",
     "CUDA_ERROR_OUT_OF_MEMORY", 2),
    ("cuLaunchKernel=719@2", "GpuDriverError", "cuLaunchKernel",
     "CUDA_ERROR_LAUNCH_FAILED", 719),
    ("cuMemcpyHtoDAsync_v2=1", "GpuDriverError", "cuMemcpyHtoDAsync_v2",
     "CUDA_ERROR_INVALID_VALUE", 1),
])
def test_driver_errors_raise_typed_exceptions(fake_cuda, gpu_add, fail, error_type,
                                              function, name, code):
    out = run_fake(fake_cuda, f"""
        model = runtime.load({gpu_add!r}, device="cuda:0")
        os.environ["SITS_FAKE_CUDA_FAIL"] = {fail!r}
        fake.sitsFakeCudaReset()
        try:
            model(np.ones((2, 4), np.float32))
            result = None
        except runtime.DeviceError as e:
            result = error(e)
        leftover = stats()["buffers"]
        del os.environ["SITS_FAKE_CUDA_FAIL"]
        again = model(np.ones((2, 4), np.float32)).tolist()
        print(json.dumps({{"error": result, "leftover": leftover, "again": again}}))
    """)
    e = out["error"]
    assert e is not None
    assert e["type"] == error_type
    assert "GpuDriverError" in e["mro"] and "DeviceError" in e["mro"]
    assert ("MemoryError" in e["mro"]) == (code == 2)
    assert (e["code"], e["subject"], e["function"], e["error_name"], e["error_code"]) == \
        ("DriverError", "cuda:0", function, name, code)
    assert e["str"].startswith(f"cuda:0 (SITS fake CUDA device 0): {function} failed "
                               f"with {name} ({code})")
    assert out["leftover"] == 1  # only the weights: the call's buffers were freed
    np.testing.assert_array_equal(out["again"], expected_sum(np.ones((2, 4), np.float32)))


def test_load_errors(fake_cuda, gpu_add, make_artifact):
    cpu_model = make_artifact("add", [{
        "name": "main", "args": [arg("input", "x", "f32", [4]), arg("input", "y", "f32", [4]),
                                 arg("output", "z", "f32", [4])]}])
    out = run_fake(fake_cuda, f"""
        results = {{}}
        for key, path, device, fail in [
                ("image", {gpu_add!r}, "cuda:0", "cuModuleLoadData=209"),
                ("cpu_code_on_gpu", {str(cpu_model)!r}, "cuda:0", ""),
                ("gpu_code_on_cpu", {gpu_add!r}, "cpu", ""),
                ("no_such_device", {gpu_add!r}, "cuda:3", "")]:
            os.environ["SITS_FAKE_CUDA_FAIL"] = fail
            try:
                runtime.load(path, device=device)
                results[key] = None
            except Exception as e:
                results[key] = error(e)
        gc.collect()
        results["after"] = stats()
        print(json.dumps(results))
    """)
    assert out["image"]["type"] == "GpuDriverError"
    assert out["image"]["error_name"] == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    assert "device image is bin for sm_90; this device is sm_90" in out["image"]["str"]
    assert out["cpu_code_on_gpu"]["type"] == "IncompatibleArtifactError"
    assert "compiled for the CPU" in out["cpu_code_on_gpu"]["str"]
    assert out["gpu_code_on_cpu"]["type"] == "IncompatibleArtifactError"
    assert out["no_such_device"]["type"] == "DeviceError"
    assert "cuda:3 does not exist: found 1 CUDA device(s)" in out["no_such_device"]["str"]
    assert (out["after"]["buffers"], out["after"]["modules"], out["after"]["contexts"]) == \
        (0, 0, 0)


@pytest.mark.parametrize("env, message", [
    ({"SITS_CUDA_DRIVER": "/nonexistent/libcuda.so.1"}, "no CUDA driver found"),
    ({"SITS_FAKE_CUDA_FAIL": "cuInit=100"}, "CUDA_ERROR_NO_DEVICE"),
])
def test_missing_or_broken_driver_is_a_device_error(fake_cuda, gpu_add, env, message):
    out = run_fake(fake_cuda, f"""
        try:
            runtime.load({gpu_add!r}, device="cuda:0")
            print(json.dumps(None))
        except Exception as e:
            print(json.dumps(error(e)))
    """, **env)
    assert out["type"] == "DeviceError" and out["code"] == "DeviceUnavailable", out
    assert message in out["str"]


@pytest.fixture(scope="module")
def compiled_mlp(model_path, tmp_path_factory):
    """mlp compiled for h100 twice: the default build (a fatbin or cubin when
    ptxas is installed), and PTX only (no ptxas), which the driver
    JIT-compiles."""
    import sits_mlir
    from sits_mlir.compiler import gpu

    def forget_ptxas():
        if hasattr(gpu.find_ptxas, "cache_clear"):
            gpu.find_ptxas.cache_clear()

    out = tmp_path_factory.mktemp("gpu_fake")
    path, inputs = model_path("mlp")
    fatbin = sits_mlir.compile(path, target="h100", output=out / "mlp.fatbin.sitsm")
    saved = os.environ.get("SITS_PTXAS")
    os.environ["SITS_PTXAS"] = "sits-no-such-ptxas"
    forget_ptxas()
    try:
        ptx = sits_mlir.compile(path, target="h100", output=out / "mlp.ptx.sitsm")
    finally:
        if saved is None:
            del os.environ["SITS_PTXAS"]
        else:
            os.environ["SITS_PTXAS"] = saved
        forget_ptxas()
    return {"fatbin": fatbin, "ptx": ptx, "inputs": inputs}


@pytest.mark.slow
@pytest.mark.parametrize("image", ["fatbin", "ptx"])
def test_compiled_model_launches_its_kernels(fake_cuda, compiled_mlp, image, tmp_path):
    art = compiled_mlp[image]
    device = art.manifest["device"]
    if image == "fatbin" and device["image_format"] == "ptx":
        pytest.skip("ptxas not installed: the default build is PTX only")
    assert (device["image_format"] == "ptx") == (image == "ptx")
    np.savez(tmp_path / "inputs.npz", **compiled_mlp["inputs"])
    out = run_fake(fake_cuda, f"""
        model = runtime.load({str(art.path)!r}, device="cuda:0")
        loaded = stats("cuModuleLoadDataEx" if {image!r} == "ptx" else "cuModuleLoadData")
        fake.sitsFakeCudaReset()
        inputs = dict(np.load({str(tmp_path / "inputs.npz")!r}))
        y = model(**inputs)
        ran = stats()
        result = {{"loaded": loaded, "ran": ran, "launches": launches(),
                  "shape": list(y.shape)}}
        del model; gc.collect()
        result["after"] = stats()
        print(json.dumps(result))
    """)
    # The device image was loaded once, by the path its format needs.
    assert out["loaded"]["modules"] == 1 and out["loaded"]["calls"] == 1
    if image == "ptx":
        assert out["loaded"]["jit_opt"] >= 0
    # Every launch of the manifest, in order, with its grid and block.
    launched = [(l["name"], l["grid"], l["block"]) for l in out["launches"]]
    assert launched == [(k["name"], k["grid"], k["block"]) for k in device["kernels"]]
    if image == "ptx":
        # The PTX gives parameter sizes: kernels take their buffers as memref
        # descriptors, (allocated, aligned) pointers into device buffers.
        for l in out["launches"]:
            assert l["params"] > 0 and l["params_in_buffers"] >= 2, l
    # Inputs copied in, the output copied out, intermediate buffers freed.
    inputs_bytes = sum(a.nbytes for a in compiled_mlp["inputs"].values())
    assert out["ran"]["to_device"] == inputs_bytes
    assert out["ran"]["to_host"] == int(np.prod(out["shape"])) * 4
    assert out["ran"]["buffers"] == 1
    assert {k: out["after"][k] for k in ("buffers", "modules", "streams", "contexts")} == \
        {"buffers": 0, "modules": 0, "streams": 0, "contexts": 0}


@pytest.fixture(scope="module")
def compiled_paged_decoder(tmp_path_factory):
    """A 2-layer GQA decoder compiled for h100 with kv_cache="paged"."""
    import sits_mlir

    sys.path.insert(0, str(ROOT / "test" / "python" / "llm"))
    import gqa_decoder

    out = tmp_path_factory.mktemp("gpu_paged")
    model = gqa_decoder.build(str(out / "gqa.onnx"))
    return sits_mlir.compile(model, target="h100", kv_cache="paged",
                             output=out / "gqa.h100.sitsm")


@pytest.mark.slow
def test_paged_decoder_step_on_the_device_path(fake_cuda, compiled_paged_decoder):
    """A decode step of a paged decoder through the device path: every
    kernel of the manifest launched in order, the pool sent down and, being
    updated in place, brought back whole with the logits (the fake runs no
    compiled kernel, so values are not checked here)."""
    art = compiled_paged_decoder
    out = run_fake(fake_cuda, f"""
        model = runtime.load({str(art.path)!r}, device="cuda:0")
        fake.sitsFakeCudaReset()
        pool = np.zeros((9, 2, 2, 2, 16, 16), np.float32)
        feeds = dict(input_ids=np.array([[5], [7]], np.int64), kv_pool=pool,
                     block_tables=np.array([[1, 2], [3, 4]], np.int32),
                     slot_mapping=np.array([[20], [50]], np.int64),
                     context_lens=np.array([5, 3], np.int32))
        logits = model(**feeds)
        ran = stats()
        result = {{"ran": ran, "launches": launches(), "shape": list(logits.shape),
                  "pool": pool.nbytes,
                  "inputs": sum(v.nbytes for k, v in feeds.items() if k != "kv_pool")}}
        del model; gc.collect()
        result["after"] = stats()
        print(json.dumps(result))
    """)
    kernels = art.manifest["device"]["kernels"]
    assert [l["name"] for l in out["launches"]] == [k["name"] for k in kernels]
    assert out["shape"] == [2, 1, 64]
    logits = 2 * 1 * 64 * 4
    # Down: the inputs, the pool and the zeroed status; back: the logits,
    # the pool and the status.
    assert out["ran"]["to_device"] == out["inputs"] + out["pool"] + 4
    assert out["ran"]["to_host"] == logits + out["pool"] + 4
    assert {k: out["after"][k] for k in ("buffers", "modules", "streams", "contexts")} == \
        {"buffers": 0, "modules": 0, "streams": 0, "contexts": 0}


# A DLPack tensor in (fake) device memory, built with ctypes as CuPy or
# PyTorch would hand one over: the runtime must use it where it lies.
DEVICE_TENSOR = """
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]
class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]
class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]
_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
class _DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]
_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_keep = []

class DeviceTensor:
    '''f32 [rows, cols] at `ptr` on cuda:`device` (row stride `pitch` elements).'''
    def __init__(self, ptr, rows, cols, device=0, pitch=None):
        self.ptr, self.shape, self.device = ptr, (rows, cols), device
        self.strides = None if pitch is None else (pitch, 1)
    def __dlpack_device__(self):
        return (2, self.device)
    def __dlpack__(self, **kwargs):
        shape = (ctypes.c_int64 * 2)(*self.shape)
        strides = (ctypes.c_int64 * 2)(*self.strides) if self.strides else None
        m = _DLManaged()
        m.dl_tensor = _DLTensor(self.ptr, _DLDevice(2, self.device), 2, _DLDataType(2, 32, 1),
                                shape, strides, 0)
        m.deleter = _Deleter(lambda p: None)
        _keep.append((shape, strides, m))
        return _new_capsule(ctypes.addressof(m), b"dltensor", None)

def device_alloc(nbytes):
    ptr = ctypes.c_ulonglong()
    assert fake.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes)) == 0
    ctypes.memset(ptr.value, 0, nbytes)  # the fake's device memory is the host's
    return ptr.value

def device_read(ptr, n):
    return np.frombuffer((ctypes.c_float * n).from_address(ptr), np.float32).copy()
"""


def test_device_resident_input_is_used_in_place(fake_cuda, gpu_add):
    """A pool already in the model's device memory (a DLPack CUDA tensor)
    is read and written there: nothing is copied down or back for it."""
    out = run_fake(fake_cuda, DEVICE_TENSOR + textwrap.dedent(f"""
        model = runtime.load({gpu_add!r}, device="cuda:0")
        update = model.entry("update")
        ptr = device_alloc(96)
        fake.sitsFakeCudaReset()
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        z1 = update(DeviceTensor(ptr, 3, 4), x)
        z2 = update(DeviceTensor(ptr, 3, 4), x)
        ran = stats()
        pool = device_read(ptr, 12)
        errors = {{}}
        for case, tensor in (("other_device", DeviceTensor(ptr, 3, 4, device=1)),
                             ("strided", DeviceTensor(ptr, 3, 4, pitch=8))):
            try:
                update(tensor, x)
                errors[case] = None
            except Exception as e:
                errors[case] = error(e)
        fake.cuMemFree_v2(ctypes.c_ulonglong(ptr))
        print(json.dumps({{"pool": pool.tolist(), "z1": z1.tolist(), "z2": z2.tolist(),
                          "ran": ran, "errors": errors}}))
    """))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(np.reshape(out["pool"], (3, 4)), 2 * x)
    np.testing.assert_array_equal(out["z1"], x + WEIGHTS)
    np.testing.assert_array_equal(out["z2"], 2 * x + WEIGHTS)
    # Only x goes down and z comes back (48 bytes each, per call).
    assert (out["ran"]["to_device"], out["ran"]["to_host"]) == (2 * 48, 2 * 48)
    other = out["errors"]["other_device"]
    assert other["type"] == "DeviceError" and other["subject"] == "pool"
    assert "lives on cuda:1, but the model runs on cuda:0" in other["str"]
    strided = out["errors"]["strided"]
    assert "SignatureError" in strided["mro"] and "not contiguous" in strided["str"]


def test_device_tensor_for_a_cpu_model_is_refused(fake_cuda, gpu_add, make_artifact):
    cpu_model = make_artifact("add", [{
        "name": "main", "args": [arg("input", "x", "f32", [-1, 4], ["rows", None]),
                                 arg("input", "y", "f32", [-1, 4], ["rows", None]),
                                 arg("output", "z", "f32", [-1, 4], ["rows", None])]}])
    out = run_fake(fake_cuda, DEVICE_TENSOR + textwrap.dedent(f"""
        runtime.load({gpu_add!r}, device="cuda:0")  # a context for the allocation
        ptr = device_alloc(48)
        model = runtime.load({str(cpu_model)!r})
        try:
            model(DeviceTensor(ptr, 3, 4), np.ones((3, 4), np.float32))
            result = None
        except Exception as e:
            result = error(e)
        fake.cuMemFree_v2(ctypes.c_ulonglong(ptr))
        print(json.dumps(result))
    """))
    assert out["type"] == "DeviceError" and out["subject"] == "x"
    assert "lives on cuda:0, but the model runs on cpu" in out["str"]


def test_kv_pool_in_device_memory(fake_cuda, gpu_add):
    """KVMemory(device="cuda:0"): the device tier is GPU memory, zeroed at
    creation; copies on the device and across tiers run through the driver;
    NumPy cannot view it, DLPack says where it is; closing frees it."""
    out = run_fake(fake_cuda, """
        from sits_mlir.runtime import kv
        fake.sitsFakeCudaReset()
        m = kv.KVMemory(num_blocks=4, num_host_blocks=2, num_layers=1, num_kv_heads=1,
                        head_dim=4, block_size=2, dtype="f32", device="cuda:0")
        allocated = stats()
        stride = m.layout["block_stride"] // 4
        ptr = m.data_ptr("device")
        # The fake's device memory is the host's: look at it directly.
        pool = np.frombuffer((ctypes.c_float * (4 * stride)).from_address(ptr), np.float32)
        zeroed = bool((pool == 0).all())
        pool[stride:2 * stride] = np.arange(1, stride + 1)
        m.apply_copies([(0, "device", 1, "device", 2, 2), (0, "device", 1, "host", 0, 2),
                        (0, "host", 0, "device", 3, 2)])
        blocks = pool.reshape(4, stride).tolist()
        host = m.host[0].ravel().tolist()
        try:
            m.device
            view = None
        except Exception as e:
            view = error(e)
        backend = m.backend("device")
        m.close(); gc.collect()
        print(json.dumps({"allocated": allocated, "zeroed": zeroed, "blocks": blocks,
                          "host": host, "view": view, "backend": backend,
                          "dlpack": list(backend["dlpack_device"]), "after": stats()}))
    """)
    assert out["allocated"]["buffers"] == 1 and out["zeroed"]
    first = list(range(1, len(out["blocks"][0]) + 1))
    assert out["blocks"][1] == out["blocks"][2] == out["blocks"][3] == first
    assert out["blocks"][0] == [0] * len(first)  # the null block
    assert out["host"] == first
    assert out["backend"]["name"] == "cuda" and not out["backend"]["host_accessible"]
    assert out["dlpack"] == [2, 0]
    assert "NOT_HOST_ACCESSIBLE" in out["view"]["str"]
    assert out["after"]["buffers"] == 0


def test_kv_pool_on_a_missing_device_is_a_device_error(fake_cuda):
    out = run_fake(fake_cuda, """
        from sits_mlir.runtime import kv
        result = {}
        for device in ("cuda:3", "tpu:0"):
            try:
                kv.KVMemory(num_blocks=4, device=device)
                result[device] = None
            except Exception as e:
                result[device] = error(e)
        print(json.dumps(result))
    """)
    assert out["cuda:3"]["type"] == "DeviceError"
    assert out["tpu:0"] is not None and "tpu" in out["tpu:0"]["str"]


@pytest.mark.slow
def test_engine_steps_with_the_pool_in_device_memory(fake_cuda, compiled_paged_decoder):
    """The engine over a paged decoder on cuda:0 with its KV pool in that
    GPU's memory: each step launches the manifest's kernels on the pool in
    place; only the step's small inputs go down and the logits come back."""
    art = compiled_paged_decoder
    out = run_fake(fake_cuda, f"""
        from sits_mlir.runtime import kv
        from sits_mlir.runtime.decoder import PagedRunner
        from sits_mlir.runtime.engine import GREEDY, Engine
        model = runtime.load({str(art.path)!r}, device="cuda:0")
        allocator = kv.KVAllocator(num_blocks=9, block_size=16, num_layers=2, num_kv_heads=2,
                                   head_dim=16, dtype="f32", max_seq_len=64,
                                   enable_prefix_caching=False)
        memory = kv.KVMemory(allocator, device="cuda:0")
        engine = Engine(allocator, PagedRunner(model, memory), max_batch_size=2)
        # The first sequence's context crosses a block boundary (14 + 6 > 16):
        # its block table grows, within one padded width.
        ids = [engine.add_request(np.array(p), 6, sampling=GREEDY)
               for p in (list(range(1, 15)), [4, 5])]
        fake.sitsFakeCudaReset()
        steps, copies = 0, []
        while engine.has_unfinished:
            before = stats("cuMemcpyHtoDAsync_v2")["calls"], stats("cuMemcpyDtoHAsync_v2")["calls"]
            engine.step()
            steps += 1
            copies.append([stats("cuMemcpyHtoDAsync_v2")["calls"] - before[0],
                           stats("cuMemcpyDtoHAsync_v2")["calls"] - before[1]])
        ran = stats("cuLaunchKernel")
        result = {{"steps": steps, "ran": ran, "launches": len(launches()),
                  "tokens": [len(engine.result(i).samples[0].tokens) for i in ids],
                  "pool_bytes": memory.layout["block_stride"] * 9,
                  "gpu": model.gpu_stats(), "graphs": graph_stats(), "copies": copies}}
        print(json.dumps(result))
    """)
    kernels = len(compiled_paged_decoder.manifest["device"]["kernels"])
    assert out["tokens"] == [6, 6]
    # A replayed step's inputs go down in one copy from page-locked staging,
    # and its logits come back in one.
    assert out["copies"][-3:] == [[1, 1]] * 3, out["copies"]
    assert out["copies"][0][0] > 1
    assert out["graphs"]["pinned"] == 1
    # Every step ran every kernel of the manifest: the prefill and the first
    # decode step launched them, the second decode step was recorded (the
    # compiled host code, its synchronizations included, captured whole),
    # and the later ones replayed it, one graph launch each, across the
    # block boundary.
    assert out["launches"] == out["steps"] * kernels
    gpu, graphs = out["gpu"], out["graphs"]
    assert gpu["calls"] == out["steps"] == 6
    assert (gpu["recordings"], gpu["replays"], gpu["record_failures"]) == (1, 4, 0)
    assert graphs["graph_launches"] == 4 and graphs["instantiated"] == 1
    assert gpu["kernels"] == out["steps"] * kernels
    assert gpu["launches"] == 2 * kernels + 4
    assert out["ran"]["calls"] == 3 * kernels  # two steps launched, one recorded
    assert gpu["host_seconds"] > 0
    # No step copied the pool: what went down and came back is far smaller.
    assert out["ran"]["to_device"] < out["pool_bytes"]
    assert out["ran"]["to_host"] < out["pool_bytes"]


def test_repeated_calls_replay_a_recording(fake_cuda, gpu_add):
    """The second call of a signature is recorded as a graph, later ones
    replay it with their own data; gpu_graphs=False launches every time."""
    out = run_fake(fake_cuda, f"""
        result = {{}}
        for graphs in (True, False):
            model = runtime.load({gpu_add!r}, device="cuda:0", gpu_graphs=graphs)
            fake.sitsFakeCudaReset()
            ok = True
            for i in range(5):
                x = np.arange(12, dtype=np.float32).reshape(3, 4) * (i + 1)
                ok &= bool(np.array_equal(model(x), x + 2 * np.array([1, 2, 3, 4], np.float32)))
            result[str(graphs)] = {{"ok": ok, "gpu": model.gpu_stats(), "graphs": graph_stats()}}
            del model; gc.collect()
        print(json.dumps(result))
    """)
    on, off = out["True"], out["False"]
    assert on["ok"] and off["ok"]
    # Launched, recorded and replayed, then replayed three times.
    assert (on["gpu"]["recordings"], on["gpu"]["replays"]) == (1, 4)
    assert on["gpu"]["launches"] == 2 + 4 and on["gpu"]["kernels"] == 10
    assert on["graphs"]["graph_launches"] == 4
    assert (off["gpu"]["recordings"], off["gpu"]["replays"], off["gpu"]["launches"]) == (0, 0, 10)


@pytest.mark.slow
def test_sits_runtime_serves_a_gpu_artifact_on_its_device(fake_cuda, compiled_paged_decoder,
                                                         tmp_path):
    """`sits-runtime` (--device auto) runs an artifact compiled for h100 on
    cuda:0 with its KV pool there; --device cpu is refused by the loader."""
    art = compiled_paged_decoder
    report = tmp_path / "report.json"
    out = run_fake(fake_cuda, f"""
        from sits_mlir.tools import runtime as cli
        fake.sitsFakeCudaReset()
        rc = cli.main(["--config", {str(art.path)!r}, "--synthetic", "2", "--prompt-len", "4",
                       "--output-len", "3", "--batch-size", "2", "--max-seq-len", "32",
                       "--json", {str(report)!r}])
        ran = stats()
        cpu = cli.main(["--config", {str(art.path)!r}, "--synthetic", "1", "--device", "cpu"])
        print(json.dumps({{"rc": rc, "cpu": cpu, "launches": ran["launches"],
                          "to_device": ran["to_device"]}}))
    """)
    assert out["rc"] == 0 and out["cpu"] == 1
    assert out["launches"] > 0
    result = json.loads(report.read_text())
    assert result["device"] == "cuda:0"
    # (The fake runs no compiled kernel: the logits, so the tokens, are not
    # the model's, and may end a request early.)
    assert (result["requests"], result["failed"]) == (2, 0)
    assert 2 <= result["output_tokens"] <= 6
    # What the steps cost the host is reported.
    gpu = result["gpu"]
    assert gpu["calls"] == result["steps"] and gpu["kernels_per_step"] > 0
    assert gpu["launches_per_step"] <= gpu["kernels_per_step"]
    assert gpu["host_ms_per_step"] > 0
