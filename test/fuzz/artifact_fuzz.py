"""Fuzz target: hostile .sitsm artifacts through the Python runtime:
`sits_mlir.runtime.load_bytes(data)` and, when it loads, calls of its entry
points with inputs built from the signature.

Contract: loading returns a model or raises an `ArtifactError` subclass,
`SignatureError` or `RuntimeCoreError` (all `SitsError`s); a call returns
outputs of the shapes and dtypes the signature gives, or raises
`SignatureError` / `RuntimeCoreError`; inputs that contradict the
signature (a wrong dtype, rank, static or tied extent, a missing or
unknown input) are refused. Any other exception, a native crash, a hang or
an out-of-memory is a finding.

The format (runtime/src/core/ARTIFACT.md) protects every byte with a
SHA-256 content hash and the weights with an XXH3-128 digest, so random
bytes end at the hash check. The custom mutator decodes the artifact,
mutates the manifest JSON (names, dtypes, shapes, dim_names with
arithmetic such as `past + seq`, roles, updated_in_place, entry points,
weights_digest, target, format_version), the set of sections, the header
fields and the section table, and re-seals both digests as a writer
would, so that mutants reach the checks behind them. The code section is
never changed: it is the real code of small models compiled once at start
(`_SEED_MODELS`), not fabricated ELF. A re-sealed artifact may run its code,
so code runs only for entry points whose ABI (symbol, argument roles,
dtypes, shapes, dim_names, updated_in_place, shape_function) is one the
code was compiled for; other entry points are only asked for their
output shapes.

    python test/fuzz/artifact_fuzz.py --seconds 600
    python test/fuzz/artifact_fuzz.py crash-1234     # reproduce one input
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import random
import struct
import subprocess
import sys
import tempfile

import numpy as np
import xxhash

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _harness  # noqa: E402

# The suite's independent encoder of the layout (ARTIFACT.md).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python" / "runtime"))
from runtime_helpers import layout  # noqa: E402

with _harness.instrumented("sits_mlir.errors", "sits_mlir.runtime"):
    from sits_mlir import runtime
    from sits_mlir.runtime import errors

NAME = "artifact"
MAX_LEN = 1 << 20

#: What loading and calling may raise (the contract).
ALLOWED = (errors.ArtifactError, errors.SignatureError, errors.RuntimeCoreError)
#: What inputs that contradict the signature must raise.
REFUSED = (errors.SignatureError,)

# -- seeds: small models compiled once ---------------------------------------

#: ONNX models (built with onnx.helper in a subprocess) compiled for the host
#: CPU: extents tied by name and summed (`past + seq`) with weights, and
#: several dtypes without weights.
_SEED_MODELS = r'''
import sys
import numpy as np
import onnx
from onnx import TensorProto as TP, helper as h, numpy_helper
import sits_mlir

out = sys.argv[1]
w = numpy_helper.from_array(
    np.random.default_rng(0).standard_normal((4, 600)).astype(np.float32), "w")
concat = h.make_model(h.make_graph(
    [h.make_node("Concat", ["a", "b"], ["c"], axis=0), h.make_node("MatMul", ["c", "w"], ["y"])],
    "concat", [h.make_tensor_value_info("a", TP.FLOAT, ["past", 4]),
               h.make_tensor_value_info("b", TP.FLOAT, ["seq", 4])],
    [h.make_tensor_value_info("c", TP.FLOAT, ["total", 4]),
     h.make_tensor_value_info("y", TP.FLOAT, ["total", 600])], [w]),
    opset_imports=[h.make_opsetid("", 17)])
dtypes = h.make_model(h.make_graph(
    [h.make_node("Cast", ["ids"], ["half"], to=TP.FLOAT16),
     h.make_node("Where", ["flag", "ids", "zero"], ["kept"]),
     h.make_node("Mul", ["s", "s"], ["sq"])],
    "dtypes", [h.make_tensor_value_info("ids", TP.INT64, ["n"]),
               h.make_tensor_value_info("flag", TP.BOOL, ["n"]),
               h.make_tensor_value_info("s", TP.FLOAT, [])],
    [h.make_tensor_value_info("half", TP.FLOAT16, ["n"]),
     h.make_tensor_value_info("kept", TP.INT64, ["n"]),
     h.make_tensor_value_info("sq", TP.FLOAT, [])],
    [numpy_helper.from_array(np.array(0, np.int64), "zero")]),
    opset_imports=[h.make_opsetid("", 17)])
for name, model in (("concat", concat), ("dtypes", dtypes)):
    sits_mlir.compile(model, "cpu", f"{out}/{name}.sitsm", threads=1)
'''

_SEEDS: list[bytes] = []
#: The seeds' code sections: the only ELF bytes a mutant may carry.
_CODES: list[bytes] = []
#: SHA-256 of each seed's code section -> the ABIs of the entry points it
#: was compiled for.
_ABIS: dict = {}


def _abi(entry: dict):
    """What compiled code assumes of its caller: an entry point's symbol,
    arguments (role, dtype, shape, dim_names, updated_in_place, in order)
    and shape function. Names of arguments and entry points are not part
    of it."""
    try:
        args = tuple((a.get("role"), a.get("dtype"), json.dumps(a.get("shape")),
                      json.dumps(a.get("dim_names")), a.get("updated_in_place", False))
                     for a in entry.get("args", ()))
        return (entry.get("symbol"), args, entry.get("shape_function"))
    except Exception:
        return None


def setup() -> None:
    """Compiles the seed models (in a subprocess: uninstrumented, and the
    compiler stays out of this process) and records their ABIs."""
    if _SEEDS:
        return
    with tempfile.TemporaryDirectory(prefix="sits-fuzz-artifact-") as tmp:
        subprocess.run([sys.executable, "-c", _SEED_MODELS, tmp], check=True,
                       env=_harness.plain_env())
        for path in sorted(pathlib.Path(tmp).glob("*.sitsm")):
            _SEEDS.append(path.read_bytes())
    for data in _SEEDS:
        decoded = decode(data)
        # The encoder below must reproduce the writer byte for byte, or
        # re-sealed mutants would all end at the hash check.
        assert decoded is not None and encode(*decoded) == data, "re-encoding a seed differs"
        manifest = json.loads(dict(decoded[1])["manifest"])
        code = dict(decoded[1])[f"code.{manifest['target']['name']}"]
        _ABIS.setdefault(hashlib.sha256(code).digest(), set()).update(
            _abi(e) for e in manifest["entry_points"])
        _CODES.append(code)


def seeds() -> list[bytes]:
    """The compiled seeds and a version 1 copy of each."""
    out = list(_SEEDS)
    for data in _SEEDS:
        version, sections = decode(data)
        manifest = json.loads(dict(sections)["manifest"])
        manifest["format_version"] = 1
        manifest.pop("weights_digest", None)
        text = json.dumps(manifest, indent=2).encode()
        out.append(encode(1, [(n, text if n == "manifest" else b) for n, b in sections]))
    return out


# -- the layout (ARTIFACT.md): decoding, encoding and sealing ------------------

_MAGIC = b"\x89SITSM\r\n"
_HASH_KEY = b'"content_hash": "'


def decode(data: bytes):
    """(format_version, [(name, bytes)]) of a well-formed artifact's
    sections in table order, or None (bounds-checked: any bytes)."""
    if len(data) < 64 or data[:8] != _MAGIC:
        return None
    version, _, count = struct.unpack_from("<III", data, 8)
    if not 1 <= count <= 64 or len(data) < 64 + 64 * count:
        return None
    sections = []
    for i in range(count):
        e = 64 + 64 * i
        name = data[e:e + 40].split(b"\0", 1)[0]
        off, size = struct.unpack_from("<QQ", data, e + 40)
        if off + size > len(data):
            return None
        try:
            sections.append((name.decode("ascii"), bytes(data[off:off + size])))
        except UnicodeDecodeError:
            return None
    if not any(n == "manifest" for n, _ in sections):
        return None
    return version, sections


def seal(out: bytearray) -> bytes:
    """Fills in the weights digest and the content hash of a laid-out
    artifact as a writer would, reading the (possibly mutated) header and
    table the way the reader does; whatever lies out of bounds stays
    unsealed."""
    if len(out) < 64:
        return bytes(out)
    version, _, count, pos = struct.unpack_from("<IIII", out, 8)
    table = {}
    for i in range(min(count, (len(out) - 64) // 64)):
        e = 64 + 64 * i
        name = bytes(out[e:e + 40]).split(b"\0", 1)[0]
        off, size = struct.unpack_from("<QQ", out, e + 40)
        if off + size <= len(out):
            table.setdefault(name, (off, size))
    if b"manifest" not in table:
        return bytes(out)
    m_off, m_size = table[b"manifest"]
    weights = table.get(b"weights")
    manifest = bytes(out[m_off:m_off + m_size])
    if version >= 2 and weights is not None:
        key = manifest.rfind(b'"weights_digest": {')
        at = manifest.find(b'"hex": "', key) if key >= 0 else -1
        if at >= 0 and at + 8 + 32 <= m_size:
            digest = xxhash.xxh3_128_hexdigest(bytes(out[weights[0]:weights[0] + weights[1]]))
            out[m_off + at + 8:m_off + at + 40] = digest.encode()
    if pos + 64 > m_size:
        return bytes(out)
    out[32:64] = bytes(32)
    out[m_off + pos:m_off + pos + 64] = b"0" * 64
    view = memoryview(out)
    if version >= 2 and weights is not None and weights[1]:
        sha = hashlib.sha256(view[:weights[0]])
        sha.update(view[weights[0] + weights[1]:])
    else:
        sha = hashlib.sha256(view)
    view.release()
    digest = sha.digest()
    out[32:64] = digest
    out[m_off + pos:m_off + pos + 64] = digest.hex().encode()
    return bytes(out)


def encode(version: int, sections) -> bytes:
    return seal(layout(version, sections))


def _in_code(out: bytes, i: int) -> bool:
    """Whether byte `i` of a laid-out artifact lies in an ELF section."""
    count = struct.unpack_from("<I", out, 16)[0]
    for k in range(min(count, (len(out) - 64) // 64)):
        off, size = struct.unpack_from("<QQ", out, 64 + 64 * k + 40)
        if off <= i < off + size and out[off:off + 4] == b"\x7fELF":
            return True
    return False


# -- the target -----------------------------------------------------------------

_DIM_CHOICES = [0, 1, 1, 2, 2, 3, 5]


def _inputs(ep, rng: random.Random):
    """Arrays for `ep`'s inputs that agree with its signature: dynamic
    extents of one name share one size."""
    sizes: dict = {}
    arrays = []
    for spec in ep.inputs:
        shape = []
        for i, d in enumerate(spec.shape):
            if d is not None:
                shape.append(d)
                continue
            name = spec.dim_names[i] if i < len(spec.dim_names) else None
            if name is not None and name not in sizes:
                sizes[name] = rng.choice(_DIM_CHOICES)
            shape.append(sizes[name] if name is not None else rng.choice(_DIM_CHOICES))
        dtype = spec.numpy_dtype
        if int(np.prod(shape, dtype=object)) * dtype.itemsize > 1 << 20:
            # Shapes of a mutated manifest: only their metadata is needed.
            try:
                arrays.append(np.broadcast_to(np.zeros((), dtype), shape))
            except ValueError:  # more elements than NumPy can index
                return None, sizes
            continue
        try:
            with np.errstate(all="ignore"):
                a = np.arange(int(np.prod(shape)), dtype=np.int64) % 7
                arrays.append(a.astype(dtype).reshape(shape))
        except ValueError:  # an empty shape with an extent NumPy cannot hold
            return None, sizes
    return arrays, sizes


def _perturb(ep, arrays: list, rng: random.Random):
    """Inputs that contradict the signature, and how, or None when `ep`
    offers nothing to contradict."""
    specs = ep.inputs
    options = ["extra"]
    if specs:
        options += ["missing", "unknown_name", "dtype", "rank"]
    if any(d is not None for s in specs for d in s.shape):
        options.append("static_extent")
    names = [n for s in specs for n in s.dim_names if n is not None]
    if len(names) != len(set(names)):
        options.append("tie")
    how = rng.choice(options)
    arrays = list(arrays)
    if how == "extra":
        return arrays + [np.zeros(1, np.float32)], {}, how
    if how == "missing":
        return arrays[:-1], {}, how
    if how == "unknown_name":
        return arrays, {"no_such_input": np.zeros(1, np.float32)}, how
    i = rng.randrange(len(specs))
    a = arrays[i]
    if how == "dtype":
        other = np.float64 if a.dtype != np.float64 else np.int32
        arrays[i] = np.zeros(a.shape, other)
    elif how == "rank":
        arrays[i] = np.zeros(a.shape + (1,), a.dtype) if rng.random() < 0.5 or not a.ndim \
            else np.zeros(a.shape[1:], a.dtype)
    elif how == "static_extent":
        i = rng.choice([k for k, s in enumerate(specs) if any(d is not None for d in s.shape)])
        a = arrays[i]
        axis = rng.choice([k for k, d in enumerate(specs[i].shape) if d is not None])
        shape = list(a.shape)
        shape[axis] += 1
        arrays[i] = np.zeros(shape, a.dtype)
    else:  # two extents of one name that differ
        seen: dict = {}
        for k, s in enumerate(specs):
            for axis, n in enumerate(s.dim_names):
                if n is not None and n in seen and seen[n] != (k, axis):
                    shape = list(arrays[k].shape)
                    shape[axis] += 1
                    arrays[k] = np.zeros(shape, arrays[k].dtype)
                    return arrays, {}, how
                if n is not None:
                    seen[n] = (k, axis)
    return arrays, {}, how


def _check_outputs(ep, outputs, expected_shapes) -> None:
    assert isinstance(outputs, tuple) and len(outputs) == len(ep.outputs), outputs
    for out, spec, shape in zip(outputs, ep.outputs, expected_shapes):
        assert out.dtype == spec.numpy_dtype, (spec, out.dtype)
        assert tuple(out.shape) == tuple(shape), (spec, out.shape, shape)


def _code_abis(model, data: bytes) -> set:
    """The ABIs the code `model` loaded was compiled for (empty when it is
    not a seed's code, or cannot be told)."""
    decoded = decode(data)
    target = model.manifest.get("target", {}).get("name")
    if decoded is None or not isinstance(target, str):
        return set()
    code = [b for n, b in decoded[1] if n == f"code.{target}"]
    return _ABIS.get(hashlib.sha256(code[0]).digest(), set()) if len(code) == 1 else set()


def _call(model, ep, data: bytes, abis: set) -> None:
    rng = random.Random(hashlib.sha256(data + ep.name.encode()).digest())
    entry = next((e for e in model.manifest.get("entry_points", ())
                  if e.get("name") == ep.name), {})
    shape_entry = next((e for e in model.manifest.get("entry_points", ())
                        if e.get("name") == ep.shape_function), None)
    runs_known_code = _abi(entry) in abis and (
        ep.shape_function is None or (shape_entry is not None and _abi(shape_entry) in abis))
    arrays, sizes = _inputs(ep, rng)
    if arrays is None:
        return
    # What the signature gives without running anything.
    try:
        shapes = ep.output_shapes(*arrays) if ep.shape_function is None or runs_known_code \
            else None
    except ALLOWED as e:
        _harness.feedback("output_shapes", type(e).__name__, e)
        shapes = None
    _harness.feedback("runs code" if runs_known_code else "metadata only",
                      "shapes" if shapes is not None else "no shapes")
    if shapes is not None:
        assert len(shapes) == len(ep.outputs)
        for shape, spec in zip(shapes, ep.outputs):
            assert len(shape) == spec.rank, (shape, spec)
            for axis, (got, static) in enumerate(zip(shape, spec.shape)):
                assert static is None or got == static, (spec, shape)
                name = spec.dim_names[axis] if axis < len(spec.dim_names) else None
                if static is None and name in sizes:
                    assert got == sizes[name], (spec, name, shape, sizes)
    if not runs_known_code:
        return
    r = rng.random()
    if r < 0.45:
        try:
            outputs = ep.run(*arrays)
        except ALLOWED as e:
            _harness.feedback("run", type(e).__name__, e)
            return
        if shapes is not None:
            _check_outputs(ep, outputs, shapes)
    elif r < 0.6 and shapes is not None:
        outs = [np.empty(s, spec.numpy_dtype) for s, spec in zip(shapes, ep.outputs)]
        if rng.random() < 0.5 and outs:  # one of the wrong shape
            k = rng.randrange(len(outs))
            outs[k] = np.empty(outs[k].shape + (1,), outs[k].dtype)
            try:
                ep.run_into(outs, *arrays)
            except REFUSED:
                return
            raise AssertionError(f"run_into accepted an output of the wrong rank ({ep})")
        ep.run_into(outs, *arrays)
    elif r < 0.7 and arrays:
        # Not contiguous, not aligned, or lists: staged or converted.
        k = rng.randrange(len(arrays))
        a = arrays[k]
        if a.ndim and a.size and rng.random() < 0.5:
            b = np.empty(a.shape[:-1] + (a.shape[-1] * 2,), a.dtype)[..., ::2]
            b[...] = a
            arrays[k] = b
        elif a.dtype.kind in "biuf" and a.size <= 64 and a.dtype.itemsize >= 4:
            arrays[k] = a.tolist()
        try:
            outputs = ep.run(*arrays)
        except ALLOWED:
            return
        if shapes is not None:
            _check_outputs(ep, outputs, shapes)
    else:
        bad, named, how = _perturb(ep, arrays, rng)
        try:
            ep.run(*bad, **named)
        except REFUSED as e:
            _harness.feedback("refused", how, e)
            return
        raise AssertionError(f"{ep} accepted inputs that contradict its signature ({how}): "
                             f"{[getattr(a, 'shape', a) for a in bad]} {list(named)}")


def one_input(data: bytes) -> None:
    if not _ABIS:
        setup()
    try:
        model = runtime.load_bytes(data)
    except ALLOWED as e:
        _harness.feedback("load", type(e).__name__, e)
        return
    assert isinstance(model.manifest, dict)
    assert model.entry_points, "a loaded model has no entry point"
    abis = _code_abis(model, data)
    for ep in list(model.entry_points.values()):
        _call(model, ep, data, abis)


# -- the structure-aware mutator ------------------------------------------------

_NAMES = ["past", "seq", "n", "batch", "total", "a", "b", "zz", "_", "n1"]
_HUGE = [2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64, 10**30]
_DTYPES = ["f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8",
           "bool", "i4", "u4", "f8e4m3fn", "f8e5m2", "f128", "", "F32", "float32", "i1"]
_ROLES = ["input", "output", "weights", "status", "Input", "", "both"]
_SYMBOLS = ["sits_entry_main", "sits_entry_other", "main", "", "memcpy", "_init", "_fini",
            "malloc", "sits_entry_main\u0000x", "sits entry"]


def _expression(rng: random.Random, depth: int = 0) -> str:
    """An extent expression as dim_names carry them (`past + seq`,
    `2*n - 1`, `(a + b) // 2`), or something close to one."""
    r = rng.random()
    if depth > 3 or r < 0.35:
        return rng.choice(_NAMES) if rng.random() < 0.7 else str(
            rng.choice([0, 1, 2, 7] + _HUGE))
    if r < 0.45:
        return f"-{_expression(rng, depth + 1)}"
    if r < 0.55:
        return f"({_expression(rng, depth + 1)})"
    op = rng.choice([" + ", " - ", "*", " * ", " // ", "//", "+"])
    return f"{_expression(rng, depth + 1)}{op}{_expression(rng, depth + 1)}"


def _odd_expression(rng: random.Random) -> str:
    return rng.choice([
        "past +", "+ past", "past ** 2", "past / 2", "past % 2", "1e3", "0x10", "past seq",
        "(" * 2000 + "past" + ")" * 2000, "(past", "past)", "-" * 3000 + "1", "pàst",
        "past+" * 500 + "seq", "9" * 400, "past // 0", "past // (seq - seq)", "-past",
        "0 - past", "n*" * 80 + "n", " ", "\t", "a\u0000b", "past + seq ", "99999999999999999999",
    ])


def _interesting(rng: random.Random):
    return rng.choice([None, True, False, 0, -1, 1, 2, -2**63, 2**63, 2**64, 1.5, -0.0,
                       1e308, "", "x", "\u00e9", "\ud800", [], {}, [[[[]]]], [None], {"a": 1},
                       "A" * 1000, [0] * 40, rng.choice(_HUGE)])


def _mutate_arg(a: dict, rng: random.Random) -> None:
    r = rng.random()
    if r < 0.15:
        a["dtype"] = rng.choice(_DTYPES)
    elif r < 0.35:
        shape = a.get("shape")
        if isinstance(shape, list) and shape and rng.random() < 0.7:
            shape[rng.randrange(len(shape))] = rng.choice([-1, -1, 0, 1, 2, 3, -2, 7] + _HUGE)
        elif isinstance(shape, list) and rng.random() < 0.5:
            shape.append(rng.choice([-1, 1, 2]))
        elif isinstance(shape, list) and shape:
            shape.pop(rng.randrange(len(shape)))
        else:
            a["shape"] = _interesting(rng)
    elif r < 0.6:
        names = a.get("dim_names")
        shape = a.get("shape") if isinstance(a.get("shape"), list) else []
        if not isinstance(names, list) or rng.random() < 0.15:
            names = [None] * len(shape)
        if names and rng.random() < 0.85:
            i = rng.randrange(len(names))
            names[i] = _expression(rng) if rng.random() < 0.8 else _odd_expression(rng)
        elif rng.random() < 0.5:
            names.append(rng.choice(_NAMES))
        elif names:
            names.pop()
        else:
            names = _interesting(rng)
        a["dim_names"] = names
    elif r < 0.7:
        a["role"] = rng.choice(_ROLES)
    elif r < 0.8:
        a["updated_in_place"] = rng.choice([True, True, False, 1, "yes", None])
    elif r < 0.9:
        a["name"] = rng.choice(["x", "a", "b", "y", "", "weights", "a" * 300, "\u00e9", 3])
    else:
        key = rng.choice(["role", "name", "dtype", "shape", "dim_names", "updated_in_place",
                          "extra"])
        if key in a and rng.random() < 0.5:
            del a[key]
        else:
            a[key] = _interesting(rng)


def _mutate_manifest(m: dict, rng: random.Random) -> None:
    entries = m.get("entry_points")
    r = rng.random()
    if r < 0.55 and isinstance(entries, list) and entries:
        e = rng.choice(entries)
        if not isinstance(e, dict):
            return
        args = e.get("args")
        s = rng.random()
        if s < 0.7 and isinstance(args, list) and args:
            arg = rng.choice(args)
            if isinstance(arg, dict):
                _mutate_arg(arg, rng)
        elif s < 0.8 and isinstance(args, list) and args:
            t = rng.random()
            if t < 0.4:
                args.append(json.loads(json.dumps(rng.choice(args))))  # a duplicate
            elif t < 0.7:
                args.pop(rng.randrange(len(args)))
            else:
                i, j = rng.randrange(len(args)), rng.randrange(len(args))
                args[i], args[j] = args[j], args[i]
        elif s < 0.9:
            key = rng.choice(["name", "symbol", "shape_function"])
            e[key] = rng.choice(_SYMBOLS + [ee.get("name") for ee in entries
                                            if isinstance(ee, dict)] + [None])
        else:
            # Another entry point with the same code: callable.
            copy = json.loads(json.dumps(e))
            copy["name"] = f"{copy.get('name')}_{rng.randrange(3)}"
            entries.append(copy)
    elif r < 0.65:
        wd = m.get("weights_digest")
        t = rng.random()
        if t < 0.3:
            m.pop("weights_digest", None)
        elif t < 0.6 or not isinstance(wd, dict):
            m["weights_digest"] = {"algorithm": rng.choice(["xxh3-128", "sha256", "", 1]),
                                   "hex": rng.choice(["0" * 32, "0" * 31, "G" * 32, "",
                                                      "A" * 32])}
        else:
            wd["algorithm"] = rng.choice(["xxh3-128", "XXH3-128", "xxh64", None])
    elif r < 0.75:
        target = m.get("target") if isinstance(m.get("target"), dict) else {}
        t = rng.random()
        if t < 0.3:
            target["triple"] = rng.choice(["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu",
                                           "x86_64-apple-darwin", "x86_64", "", "riscv64",
                                           "x86_64-pc-windows-msvc", "unknown"])
        elif t < 0.6:
            feats = target.get("features") if isinstance(target.get("features"), list) else []
            feats.append(rng.choice(["+avx512f", "+amx-tile", "+nonexistent", "-sse2", "+",
                                     "sse2", "+sse2", ""]))
            target["features"] = feats
        elif t < 0.8:
            target["name"] = rng.choice(["cpu", "gpu", "", "CPU", "a" * 40, "cpu/../x", "h100"])
        else:
            m["device"] = rng.choice([{"kind": "cuda", "abi": "mlir-gpu-runtime"},
                                      {"kind": "hip"}, {}, "cpu", None])
        m["target"] = target
    elif r < 0.85:
        m["format_version"] = rng.choice([1, 2, 3, 0, -1, "2", 2.0, None, 2**40])
    else:
        key = rng.choice(["entry_points", "target", "sits_version", "llvm_version", "pipeline",
                          "extra_key", "content_hash"])
        if key in m and rng.random() < 0.4 and key != "content_hash":
            del m[key]
        else:
            m[key] = _interesting(rng) if key != "content_hash" else "0" * 64


def _manifest_text(m: dict, rng: random.Random) -> bytes:
    """The writer prints with two-space indentation; other spellings are
    JSON too. The content hash stays last, where the sealer finds it."""
    m.pop("content_hash", None)
    m["content_hash"] = "0" * 64
    r = rng.random()
    if r < 0.8:
        text = json.dumps(m, indent=2)
    elif r < 0.9:
        text = json.dumps(m, separators=(",", ":"))
    else:
        text = json.dumps(m, indent=1, ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    decoded = decode(data)
    # The corpus fills with refused variants (one per native check): start
    # from a seed a quarter of the time, so that loaded artifacts stay common.
    if decoded is None or rng.random() < 0.25:
        if not _SEEDS:
            return _harness.raw_mutate(data, max_size, seed)
        decoded = decode(rng.choice(_SEEDS))
    version, sections = decoded
    # A damaged copy of the code must never be sealed (it could be loaded
    # and run): ELF bytes are a seed's code, exactly.
    sections = [(n, b if b[:4] != b"\x7fELF" or b in _CODES or not _CODES
                 else rng.choice(_CODES)) for n, b in sections]
    r = rng.random()
    if r < 0.6:  # the manifest's JSON
        i = next(k for k, (n, _) in enumerate(sections) if n == "manifest")
        try:
            m = json.loads(sections[i][1])
        except ValueError:
            m = None
        if isinstance(m, dict):
            for _ in range(rng.choice([1, 1, 2, 3])):
                _mutate_manifest(m, rng)
            sections[i] = ("manifest", _manifest_text(m, rng))
        else:
            sections[i] = ("manifest", _harness.raw_mutate(sections[i][1], 1 << 16, seed))
    elif r < 0.68:  # the manifest's text
        i = next(k for k, (n, _) in enumerate(sections) if n == "manifest")
        text = sections[i][1]
        key = text.rfind(_HASH_KEY)
        head = text[:key] if key > 0 else text
        tail = text[key:] if key > 0 else b""
        sections[i] = ("manifest", _harness.raw_mutate(head, 1 << 16, seed) + tail)
    elif r < 0.8:  # the set of sections
        t = rng.random()
        names = [n for n, _ in sections]
        if t < 0.2 and len(sections) > 1:
            k = rng.randrange(len(sections))
            if sections[k][0] != "manifest" or rng.random() < 0.1:
                sections.pop(k)
        elif t < 0.35:
            sections.append((rng.choice(["notes.txt", "device.sm_90", "code.other", "weights",
                                         "manifest", "code.cpu", "x" * 39, "UPPER", "a/b"]),
                             bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 100])))))
        elif t < 0.5 and "weights" in names:
            k = names.index("weights")
            w = bytearray(sections[k][1])
            u = rng.random()
            if u < 0.3 and w:
                w = w[:rng.randrange(len(w))]
            elif u < 0.5:
                w += bytes(rng.choice([1, 64, 4096]))
            elif w:
                w[rng.randrange(len(w))] ^= 1 << rng.randrange(8)  # weights are data
            sections[k] = ("weights", bytes(w))
        elif t < 0.65:
            k = rng.randrange(len(sections))
            sections[k] = (rng.choice(["code.cpu", "code.gpu", "weights", "manifest", "code.",
                                       "code.cpu2", ""]), sections[k][1])
        else:
            rng.shuffle(sections)
    elif r < 0.92:  # the header and the section table, after the layout
        out = layout(version, sections)
        count = len(sections)
        t = rng.random()
        if t < 0.15:
            struct.pack_into("<I", out, 8, rng.choice([0, 1, 2, 3, 2**32 - 1]))
        elif t < 0.25:
            struct.pack_into("<I", out, 12, rng.choice([0, 64, 64 + 64 * count + 64, 2**32 - 1]))
        elif t < 0.35:
            struct.pack_into("<I", out, 16, rng.choice([0, count - 1, count + 1, 1025, 2**32 - 1]))
        elif t < 0.45:
            struct.pack_into("<I", out, 20, rng.choice([0, 1, 2**32 - 1, 2**32 - 64]))
        elif t < 0.5:
            struct.pack_into("<Q", out, 24, rng.choice([0, len(out) - 1, len(out) + 1, 2**64 - 1]))
        else:
            e = 64 + 64 * rng.randrange(count)
            field = rng.choice([(40, "<Q"), (48, "<Q"), (56, "<I"), (60, "<I"), (0, "name")])
            if field[1] == "name":
                out[e:e + 40] = rng.choice([b"manifest", b"weights", b"code.cpu", b"MANIFEST",
                                            b"x" * 40, b"a\0b", b""]).ljust(40, b"\0")[:40]
            else:
                old = struct.unpack_from(field[1], out, e + field[0])[0]
                new = rng.choice([0, 1, 63, 64, old + 64, old - 64, old + 1, 2**63, 2**64 - 1,
                                  2**32 - 1, len(out), old * 2])
                struct.pack_into(field[1], out, e + field[0], new % (1 << (8 * struct.calcsize(
                    field[1]))))
        if rng.random() < 0.05:  # truncated or extended after sealing
            sealed = seal(out)
            return (sealed[:rng.randrange(len(sealed))] if rng.random() < 0.5
                    else sealed + b"\0" * 64)[:max_size] or sealed[:max_size]
        out = seal(out)
        return out if len(out) <= max_size else data
    elif r < 0.96:
        version = rng.choice([1, 1, 2, 3, 0])
    else:  # not sealed: the hash check (outside the code, as code is never altered)
        out = bytearray(encode(version, sections))
        i = rng.randrange(len(out))
        while _in_code(out, i):
            i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
        return bytes(out[:max_size])
    out = encode(version, sections)
    return out if len(out) <= max_size else data


if __name__ == "__main__":
    sys.exit(_harness.main(NAME, one_input, custom_mutator=mutate, seeds=seeds, setup=setup,
                           max_len=MAX_LEN))
