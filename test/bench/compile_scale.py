#!/usr/bin/env python3
"""Compile time and memory of real-size Llama decoders, per stage.

Builds a Llama-shaped decoder from a `transformers` config (seeded random
weights, no download: HF_HUB_OFFLINE=1), exports it with its KV cache the
way deployment exports it (`input_ids`, `position_ids`, past K/V of every
layer -> logits, present K/V; the big shape with its weights as ONNX external
data), and measures each stage in a fresh process of its own, so that every
peak resident set is that stage's:

* export: torch -> ONNX (seconds, peak RSS, ONNX bytes with external data);
* compile: `sits_mlir.compile`, with the driver's own stage times (import,
  page KV cache, lower = the whole MLIR pass pipeline, codegen = weights
  serialization + LLVM translate/optimize/object emission, link, write), the
  peak RSS of each stage (VmHWM, reset between stages through
  /proc/self/clear_refs; it counts the touched pages of mapped files: the
  external data read, the artifact written), the peak anonymous RSS of each
  stage (RssAnon, sampled every 20 ms by a child process), and the
  artifact's bytes;
* load: `sits_mlir.runtime.load` (seconds, RSS / RssAnon / RssFile after);
* check (unless --skip-ort or onnxruntime is missing): one prefill and one
  decode step against onnxruntime, logits within 1e-4 relative.

Shapes: `small` is the 55 M Llama (hidden 512, 8 layers, 8 query / 2 K/V
heads, FFN 1376, vocabulary 32000), `tinyllama` the TinyLlama-1.1B shape
(hidden 2048, 22 layers, 32 / 4 heads, FFN 5632, vocabulary 32000), `custom`
hidden 256, 2 layers, 4 / 2 heads, vocabulary 4096; --layers, --hidden,
--heads, --kv-heads, --ffn and --vocab override any of them.

    nice python test/bench/compile_scale.py --shape small --kv-cache paged
    nice python test/bench/compile_scale.py --shape custom --layers-sweep 2,4,8
    nice python test/bench/compile_scale.py --shape small --kv-cache paged \
        --layers-sweep 8,32 --repeat 3 --skip-ort --skip-load
    nice python test/bench/compile_scale.py --shape custom --pass-timing --dump-ir /tmp/ir
    nice python test/bench/compile_scale.py --shape llama7b --kv-cache both \
        --skip-ort --serve-tokens 3 --workdir /tmp/7b   # ~30 GB of disk

`llama7b` is a 7 B Llama (hidden 4096, 32 layers, GQA 32/8, FFN 14336) in
fp16, too big to export through torch on a 24 GB machine: --synthesize
(automatic for it) exports two layers and repeats the last one in the ONNX
graph, streaming seeded random weights to the external data file one tensor
at a time. --dtype float16/bfloat16 exports any shape in that type (weights,
activations and KV cache); --precision quantizes the weights at compile
time; --serve-tokens N loads the artifact and times a prefill and N greedy
decode steps (SITS alone).

--layers-sweep L1,L2,... compiles the shape at each layer count and prints
compile seconds against layers: a repeated layer is imported and compiled
once, so what still grows with the depth is per-layer glue and the work
proportional to the weights (packing, writing the artifact); it ends with
the growth in percent from the first count to the last. --repeat N
compiles each configuration N times and reports the fastest, which keeps
a noisy machine's spikes out of that ratio, and the growth of the medians.
The bytes each compile writes (/proc/self/io) are the noise-free part of
that growth: a compile that writes each weight once writes its artifact.
--pass-timing prints MLIR's pass timing of the compile pipeline (top passes
by wall time); --dump-ir DIR writes the IR before and after the pipeline,
counts its ops and functions, and with --llvm-timing times LLVM's optimizer
and code generator on it separately (mlir-translate, opt -O3, llc -O3 with
-time-passes).

A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

# The decoder exporter the LLM tests use (test/python/llm/hf_decoders.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python" / "llm"))
import hf_decoders  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHAPES = {
    # ~55 M parameters (16.4 M embedding, 16.4 M LM head, 2.8 M per layer).
    "small": dict(hidden=512, layers=8, heads=8, kv_heads=2, ffn=1376, vocab=32000),
    # TinyLlama-1.1B (its config.json, with random weights).
    "tinyllama": dict(hidden=2048, layers=22, heads=32, kv_heads=4, ffn=5632, vocab=32000),
    "custom": dict(hidden=256, layers=2, heads=4, kv_heads=2, ffn=None, vocab=4096),
    # Llama-2/3-7B-class (Mistral-7B's shape): fp16, layers synthesized.
    "llama7b": dict(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336, vocab=32000),
}
#: Parameters above which the weights go to ONNX external data (--external-data auto).
EXTERNAL_ABOVE = 500_000_000
#: Tokens of the checked prefill (then one decode step).
PROMPT = 7


# ------------------------------------------------------------------ process memory
def _status() -> dict:
    """/proc/self/status memory fields, in MiB."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "VmSize"):
                fields[key] = int(value.split()[0]) / 1024
    return fields


_SAMPLER = r"""
import select, sys
path, peak = f"/proc/{sys.argv[1]}/status", 0.0
def anon():
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
while True:
    peak = max(peak, anon())
    ready, _, _ = select.select([sys.stdin], [], [], 0.02)
    if ready:
        if not sys.stdin.readline():
            break
        now = anon()
        print(max(peak, now), flush=True)
        peak = now
"""


class _AnonSampler:
    """The largest RssAnon of this process since the last reset, polled
    every 20 ms by a child process (a thread would wait for the GIL while
    native code holds it)."""

    def __init__(self):
        self._child = subprocess.Popen([sys.executable, "-c", _SAMPLER, str(os.getpid())],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def reset(self) -> float:
        """The peak so far (MiB), starting a new one."""
        self._child.stdin.write("r\n")
        self._child.stdin.flush()
        return float(self._child.stdout.readline() or 0.0)

    def stop(self):
        self._child.stdin.close()
        self._child.wait()


def _reset_peak() -> bool:
    """Resets VmHWM to the current RSS (Linux: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _written_bytes() -> int:
    """Bytes this process has passed to write calls (/proc/self/io wchar):
    the artifact, scratch files and logs, whatever the page cache did."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_s(who=None) -> float:
    """User + system CPU seconds of this process (or its waited children)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF if who is None else who)
    return r.ru_utime + r.ru_stime


def _mib(n_bytes: float) -> float:
    return n_bytes / 2**20


# ------------------------------------------------------------------ the decoder
def default_ffn(hidden: int) -> int:
    """Llama's usual FFN width: 8/3 of hidden, rounded up to 32 (512 -> 1376)."""
    return int(math.ceil(8 * hidden / 3 / 32) * 32)


def resolve_shape(args) -> dict:
    shape = dict(SHAPES[args.shape])
    for key in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
        if getattr(args, key) is not None:
            shape[key] = getattr(args, key)
    if shape["ffn"] is None:
        shape["ffn"] = default_ffn(shape["hidden"])
    if shape["hidden"] % shape["heads"] or shape["heads"] % shape["kv_heads"]:
        raise SystemExit(f"hidden {shape['hidden']} / heads {shape['heads']} / kv heads "
                         f"{shape['kv_heads']} do not divide")
    shape["head_dim"] = shape["hidden"] // shape["heads"]
    shape["positions"] = args.positions
    return shape


def parameter_count(s: dict) -> int:
    h, f, v, hd = s["hidden"], s["ffn"], s["vocab"], s["head_dim"]
    attn = h * h * 2 + 2 * h * s["kv_heads"] * hd
    return 2 * v * h + s["layers"] * (attn + 3 * h * f + 2 * h) + h


#: Layers exported through torch when the rest are synthesized (--synthesize).
EXPORTED_LAYERS = 2
#: Weights at least this big are written with random values when layers are
#: synthesized (norm weights and rotary tables keep their exported values).
RANDOM_ABOVE = 1 << 20


def synthesize_layers(src: str, dst: str, layers: int, seed: int = 0) -> None:
    """Writes to `dst` (+ `dst`.data) the decoder exported at `src` with its
    last layer repeated up to `layers` layers, every big weight (embedding,
    projections, LM head) seeded random data of its type streamed into the
    external data file one tensor at a time: a model whose fp32/fp16 weights
    do not fit in memory twice (7 B parameters and up), with the graph the
    exporter writes. Past/present K/V inputs and outputs follow the
    exporter's names."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(src)
    g = proto.graph

    def big(t):
        return len(t.dims) >= 2 and int(np.prod(tuple(t.dims), dtype=np.int64)) >= RANDOM_ABOVE

    # Big weights get random data below: drop the exported bytes now, before
    # the layer copies multiply them.
    for t in g.initializer:
        if big(t):
            t.ClearField("raw_data")
    last = EXPORTED_LAYERS - 1
    tag = f"/layers.{last}/"
    layer = [n for n in g.node if tag in n.name]
    produced = {o for n in layer for o in n.output if o}
    # The residual stream leaving the last layer (read by the final norm)
    # and entering it (the previous layer's output under the same name).
    outside = [i for n in g.node if tag not in n.name for i in n.input if i in produced]
    [out] = sorted(set(outside))
    prev = out.replace(f"layers.{last}", f"layers.{last - 1}")
    inits = {t.name: t for t in g.initializer}
    readers: dict = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, set()).add(tag in n.name)
    own = {i for n in layer for i in n.input if i in inits and readers[i] == {True}}

    new_nodes, new_inits, new_inputs, new_outputs = [], [], [], []
    carried = out
    for k in range(EXPORTED_LAYERS, layers):
        names = {}

        def rename(t, k=k):
            if t in names:
                return names[t]
            if t == prev:
                r = carried
            elif t in (f"past_key_{last}", f"past_value_{last}",
                       f"present_key_{last}", f"present_value_{last}"):
                r = t[: t.rindex("_") + 1] + str(k)
            elif t in produced:
                r = t.replace(f"layers.{last}", f"layers.{k}") if f"layers.{last}" in t \
                    else f"{t}__layer{k}"
            elif t in own:
                r = f"{t}__layer{k}"
                copy = onnx.TensorProto()
                copy.CopyFrom(inits[t])
                copy.name = r
                new_inits.append(copy)
            else:
                r = t
            names[t] = r
            return r

        for n in layer:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            c.name = n.name.replace(tag, f"/layers.{k}/")
            c.input[:] = [rename(i) if i else i for i in n.input]
            c.output[:] = [rename(o) if o else o for o in n.output]
            new_nodes.append(c)
        for vi, dst_list in ((g.input, new_inputs), (g.output, new_outputs)):
            for v in vi:
                if v.name in names and v.name != names[v.name]:
                    c = onnx.ValueInfoProto()
                    c.CopyFrom(v)
                    c.name = names[v.name]
                    dst_list.append(c)
        carried = names[out]
    # New layers go after the last exported one; the final norm reads the
    # last new layer.
    at = max(i for i, n in enumerate(g.node) if tag in n.name) + 1
    nodes = list(g.node[:at]) + new_nodes + list(g.node[at:])
    for n in nodes[at + len(new_nodes):]:
        n.input[:] = [carried if i == out else i for i in n.input]
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(new_inits)
    g.input.extend(new_inputs)
    outputs = list(g.output) + new_outputs
    del g.output[:]
    g.output.extend(outputs)

    # Big weights: seeded random data, streamed to the external data file.
    rng = np.random.default_rng(seed)
    pool = (rng.standard_normal(1 << 24) * 0.02).astype(np.float32)
    data = os.path.basename(dst) + ".data"
    offset = 0
    with open(dst + ".data", "wb") as f:
        for t in g.initializer:
            if not big(t):
                continue
            count = int(np.prod(tuple(t.dims), dtype=np.int64))
            dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
            start = offset
            written = 0
            while written < count:
                n = min(count - written, pool.size // 2)
                at_ = int(rng.integers(0, pool.size - n + 1))
                f.write(pool[at_: at_ + n].astype(dtype).tobytes())
                written += n
            offset = f.tell()
            pad = (-offset) % 64
            f.write(b"\0" * pad)
            offset += pad
            t.ClearField("raw_data")
            for field in ("float_data", "int32_data", "int64_data", "double_data"):
                t.ClearField(field)
            del t.external_data[:]
            t.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", data), ("offset", str(start)),
                               ("length", str(count * np.dtype(dtype).itemsize))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
    with open(dst, "wb") as f:
        f.write(proto.SerializeToString())


def resave_external(exported: str, path: str) -> None:
    """Re-saves the model torch exported to `exported` (alone in its folder,
    with any one-file-per-tensor external data next to it) as `path` with
    every weight in one `<path>.data`, and removes the export's folder."""
    import onnx

    proto = onnx.load(exported)  # reads any external files the exporter wrote
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=os.path.basename(path) + ".data", size_threshold=1024)
    del proto
    shutil.rmtree(os.path.dirname(exported))


def stage_export(spec: dict) -> dict:
    """Builds the Llama decoder and exports it to spec['onnx']."""
    import torch
    import transformers

    s = spec["shape"]
    torch.manual_seed(spec.get("seed", 0))
    synthesize = spec.get("synthesize", False)
    dtype = spec.get("dtype", "float32")
    cfg = transformers.LlamaConfig(
        num_hidden_layers=EXPORTED_LAYERS if synthesize else s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"], hidden_size=s["hidden"],
        intermediate_size=s["ffn"], vocab_size=s["vocab"],
        max_position_embeddings=s["positions"], tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    cfg.eos_token_id = None
    start = time.perf_counter()
    model = transformers.LlamaForCausalLM(cfg).eval().to(getattr(torch, dtype))
    build_s = time.perf_counter() - start
    params = parameter_count(s)
    kv_heads, head_dim = s["kv_heads"], s["head_dim"]
    layers = cfg.num_hidden_layers

    path = spec["onnx"]
    if synthesize:
        # EXPORTED_LAYERS through torch, the rest repeated in the graph with
        # random weights written straight to the external data.
        target = os.path.join(os.path.dirname(path), "export-tmp", "two-layers.onnx")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        start = time.perf_counter()
        hf_decoders.export(model, target, layers, kv_heads, head_dim, dtype=dtype)
        del model
        export_s = time.perf_counter() - start
        synthesize_layers(target, path, s["layers"], seed=spec.get("seed", 0))
        shutil.rmtree(os.path.dirname(target))
        onnx_bytes = os.path.getsize(path) + os.path.getsize(path + ".data")
        return {"seconds": time.perf_counter() - start + build_s, "build_s": build_s,
                "export_s": export_s, "params": params, "onnx_bytes": onnx_bytes,
                "external_data": True, "synthesized": s["layers"] - EXPORTED_LAYERS}
    external = spec["external_data"]
    # The exporter writes one file per tensor next to the model when the
    # model passes protobuf's 2 GB; it goes to a folder of its own and is
    # re-saved as <model>.onnx + <model>.onnx.data.
    target = os.path.join(os.path.dirname(path), "export-tmp", os.path.basename(path)) \
        if external else path
    os.makedirs(os.path.dirname(target), exist_ok=True)
    start = time.perf_counter()
    hf_decoders.export(model, target, layers, kv_heads, head_dim, dtype=dtype)
    export_s = time.perf_counter() - start
    del model
    if external:
        resave_external(target, path)
    onnx_bytes = sum(os.path.getsize(os.path.join(os.path.dirname(path), f))
                     for f in os.listdir(os.path.dirname(path))
                     if f == os.path.basename(path) or f == os.path.basename(path) + ".data")
    return {"seconds": time.perf_counter() - start + build_s, "build_s": build_s,
            "export_s": export_s, "params": params, "onnx_bytes": onnx_bytes,
            "external_data": external}


# ------------------------------------------------------------------ compile
_TIMING_LINE = re.compile(r"^(?P<cols>(?:\s*[\d.]+ \(\s*[\d.]+%\))+)\s{2}(?P<indent>\s*)"
                          r"(?P<name>\S.*)$")


def parse_pass_timing(text: str) -> list[dict]:
    """MLIR's execution time report (tree display) as a list of
    {name, wall, depth, index} rows in report order; every report in `text`
    (one per PassManager) is concatenated."""
    rows = []
    for line in text.splitlines():
        m = _TIMING_LINE.match(line)
        if not m:
            continue
        numbers = re.findall(r"([\d.]+) \(", m.group("cols"))
        name = m.group("name").strip()
        if name in ("Total", "Rest"):
            continue
        rows.append({"name": name, "wall": float(numbers[-1]),
                     "depth": len(m.group("indent")) // 2, "index": len(rows)})
    return rows


def stage_compile(spec: dict) -> dict:
    """sits_mlir.compile of spec['onnx'], instrumented: per driver stage
    seconds and peak RSS, the native emitters' seconds, optionally MLIR's
    pass timing and the IR before/after the pipeline."""
    import sits_mlir
    from sits_mlir import passmanager
    from sits_mlir.compiler import driver

    base = _status()
    stages: dict = {}
    can_reset = _reset_peak()
    # VmHWM counts the pages of mapped files (the ONNX external data, the
    # artifact being written); the anonymous peak is sampled on the side.
    anon = _AnonSampler()

    class Progress(driver._Progress):
        def stage(self, name, detail=""):
            outer = super().stage(name, detail)

            class Wrapped:
                def __enter__(self_inner):
                    _reset_peak()
                    anon.reset()
                    self_inner.start = time.perf_counter()
                    self_inner.cpu = _cpu_s()
                    return outer.__enter__()

                def __exit__(self_inner, *exc):
                    result = outer.__exit__(*exc)
                    st = _status()
                    stages[name] = {"seconds": time.perf_counter() - self_inner.start,
                                    "cpu_s": _cpu_s() - self_inner.cpu,
                                    "peak_mib": st["VmHWM"], "rss_after_mib": st["VmRSS"],
                                    "peak_anon_mib": anon.reset()}
                    return result
            return Wrapped()

    driver._Progress = Progress

    native: dict = collections.defaultdict(float)
    original_native = driver._native_call

    def timed_native(name, *args):
        start = time.perf_counter()
        try:
            return original_native(name, *args)
        finally:
            native[name] += time.perf_counter() - start

    driver._native_call = timed_native

    if spec.get("pass_timing"):
        def run_pipeline(module, pipeline):
            pm = passmanager.PassManager.parse(pipeline)
            pm.enable_timing()
            try:
                pm.run(module.operation)
            except sits_mlir.ir.MLIRError as error:
                raise sits_mlir.CompileError.from_mlir_error("compilation failed", error) \
                    from None
            finally:
                print(f"[compile_scale] pass timing of {pipeline[:60]}...", file=sys.stderr,
                      flush=True)
                del pm  # the report is printed (to stderr) when the pass manager goes
                sys.stderr.flush()
        driver._run_pipeline = run_pipeline

    dump = spec.get("dump_ir")
    dump_s = [0.0]
    if dump:
        os.makedirs(dump, exist_ok=True)
        original_lower = driver.lower

        def lower(module, target="cpu", options=None):
            start = time.perf_counter()
            with open(os.path.join(dump, "before.mlir"), "w") as f:
                module.operation.print(file=f, large_elements_limit=64)
            dump_s[0] += time.perf_counter() - start
            pipeline = original_lower(module, target, options)
            start = time.perf_counter()
            with open(os.path.join(dump, "after.mlir"), "w") as f:
                module.operation.print(file=f, large_elements_limit=64)
            # The same without the SITS module attributes, for mlir-translate.
            with sits_mlir.ir.Context():
                with open(os.path.join(dump, "after.mlir")) as f:
                    clean = sits_mlir.ir.Module.parse(f.read())
                attrs = clean.operation.attributes
                for name in [a for a in attrs if a.startswith("sits.")]:
                    del attrs[name]
                with open(os.path.join(dump, "after-llvm.mlir"), "w") as f:
                    clean.operation.print(file=f)
            with open(os.path.join(dump, "pipeline.txt"), "w") as f:
                f.write(pipeline + "\n")
            dump_s[0] += time.perf_counter() - start
            return pipeline
        driver.lower = lower

    start = time.perf_counter()
    written = _written_bytes()
    art = sits_mlir.compile(spec["onnx"], spec["target"], spec["artifact"],
                            threads=spec["threads"], kv_cache=spec["kv_cache"],
                            kv_block_size=spec["block_size"],
                            precision=spec.get("precision", "fp32"), progress=True,
                            outline_layers=spec.get("outline_layers", True))
    total = time.perf_counter() - start
    written = _written_bytes() - written
    anon.stop()
    if dump_s[0] and "lower" in stages:
        # Writing the IR is not compiling: the lower stage's time leaves it out.
        stages["lower"]["seconds"] -= dump_s[0]
        total -= dump_s[0]
    return {"seconds": total, "dump_s": dump_s[0], "timings": art.timings, "stages": stages,
            "written_bytes": written,
            "native": dict(native), "artifact_bytes": os.path.getsize(spec["artifact"]),
            "peak_mib": max((s["peak_mib"] for s in stages.values()), default=0.0)
            if can_reset else _status()["VmHWM"], "base_mib": base["VmRSS"],
            "peak_anon_mib": max((s["peak_anon_mib"] for s in stages.values()), default=0.0),
            "pipeline": art.pipeline}


# ------------------------------------------------------------------ load / check
def stage_load(spec: dict) -> dict:
    from sits_mlir import runtime

    runtime.set_num_threads(spec["threads"])
    base = _status()
    _reset_peak()
    start = time.perf_counter()
    model = runtime.load(spec["artifact"])
    seconds = time.perf_counter() - start
    after = _status()
    del model
    return {"seconds": seconds, "base_mib": base["VmRSS"], "rss_mib": after["VmRSS"],
            "anon_mib": after["RssAnon"], "file_mib": after["RssFile"],
            "peak_mib": after["VmHWM"]}


def _rel(a, e) -> float:
    import numpy as np

    a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
    return float(np.linalg.norm(a - e) / max(np.linalg.norm(e), 1e-30))


def _kv_dtype(spec: dict):
    import numpy as np

    return np.dtype(spec.get("dtype", "float32"))


def _sits_stepper(spec: dict, model):
    """step(ids [1, T], position) -> logits [1, T, vocab] of the loaded
    artifact, keeping its KV cache (a contiguous past, or a paged pool
    with one sequence's blocks) between calls."""
    import numpy as np

    s = spec["shape"]
    layers, kvh, hd = s["layers"], s["kv_heads"], s["head_dim"]
    dtype = _kv_dtype(spec)
    if spec["kv_cache"] == "paged":
        block = spec["block_size"]
        blocks = -(-spec.get("max_tokens", PROMPT + 1) // block)
        pool = np.zeros((blocks + 1, layers, 2, kvh, block, hd), dtype)
        table = np.arange(1, blocks + 1, dtype=np.int32)[None]  # block 0 unused

        def step(ids, position):
            slots = np.array([[table[0, p // block] * block + p % block
                               for p in range(position, position + ids.shape[1])]], np.int64)
            return model.run(input_ids=ids, position_ids=np.arange(
                position, position + ids.shape[1], dtype=np.int64)[None], kv_pool=pool,
                block_tables=table, slot_mapping=slots,
                context_lens=np.array([position + ids.shape[1]], np.int32))[0]
        return step
    past = [np.zeros((1, kvh, 0, hd), dtype) for _ in range(2 * layers)]

    def step(ids, position):
        feeds = {"input_ids": ids, "position_ids": np.arange(
            position, position + ids.shape[1], dtype=np.int64)[None]}
        for i in range(layers):
            feeds[f"past_key_{i}"], feeds[f"past_value_{i}"] = past[2 * i], past[2 * i + 1]
        logits, *past[:] = model.run(**feeds)
        return logits
    return step


def stage_check(spec: dict) -> dict:
    """One prefill of PROMPT tokens and one decode step, SITS against
    onnxruntime on the exported model; relative error of the logits."""
    import numpy as np
    import onnxruntime as ort

    from sits_mlir import runtime

    s = spec["shape"]
    runtime.set_num_threads(spec["threads"])
    model = runtime.load(spec["artifact"])
    so = ort.SessionOptions()
    so.intra_op_num_threads = spec["threads"]
    so.log_severity_level = 3
    session = ort.InferenceSession(spec["onnx"], so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    prompt = rng.integers(0, s["vocab"], (1, PROMPT)).astype(np.int64)
    layers, kvh, hd = s["layers"], s["kv_heads"], s["head_dim"]
    past = [np.zeros((1, kvh, 0, hd), _kv_dtype(spec)) for _ in range(2 * layers)]

    def feeds(ids, position, past):
        f = {"input_ids": ids, "position_ids": np.arange(
            position, position + ids.shape[1], dtype=np.int64)[None]}
        for i in range(layers):
            f[f"past_key_{i}"], f[f"past_value_{i}"] = past[2 * i], past[2 * i + 1]
        return f

    ref_prefill, *ref_past = session.run(None, feeds(prompt, 0, past))
    token = ref_prefill[:, -1].argmax(-1).astype(np.int64)[:, None]
    ref_decode = session.run(None, feeds(token, PROMPT, ref_past))[0]
    step = _sits_stepper(spec, model)
    sits_prefill = step(prompt, 0)
    sits_decode = step(token, PROMPT)
    return {"prefill_rel": _rel(sits_prefill, ref_prefill),
            "decode_rel": _rel(sits_decode, ref_decode)}


def stage_serve(spec: dict) -> dict:
    """SITS alone: load, one prefill of PROMPT tokens, then greedy decode
    steps (spec["serve_tokens"]); seconds per step, tokens, resident memory."""
    import numpy as np

    from sits_mlir import runtime

    s = spec["shape"]
    runtime.set_num_threads(spec["threads"])
    start = time.perf_counter()
    model = runtime.load(spec["artifact"])
    load_s = time.perf_counter() - start
    new = spec["serve_tokens"]
    step = _sits_stepper(dict(spec, max_tokens=PROMPT + new), model)
    prompt = np.random.default_rng(1).integers(0, s["vocab"], (1, PROMPT)).astype(np.int64)
    start = time.perf_counter()
    logits = np.asarray(step(prompt, 0), np.float32)
    prefill_s = time.perf_counter() - start
    finite = bool(np.isfinite(logits).all())
    tokens, times = [], []
    position = PROMPT
    for _ in range(new):
        token = int(logits[0, -1].argmax())
        tokens.append(token)
        start = time.perf_counter()
        logits = np.asarray(step(np.array([[token]], np.int64), position), np.float32)
        times.append(time.perf_counter() - start)
        finite = finite and bool(np.isfinite(logits).all())
        position += 1
    status = _status()
    return {"load_s": load_s, "prefill_s": prefill_s, "decode_s": times, "tokens": tokens,
            "finite": finite, "rss_mib": status["VmRSS"], "anon_mib": status["RssAnon"]}


STAGES = {"export": stage_export, "compile": stage_compile, "load": stage_load,
          "check": stage_check, "serve": stage_serve}


# ------------------------------------------------------------------ orchestration
def run_stage(stage: str, spec: dict, log_path: str) -> dict:
    """Runs one stage in a fresh process; its stderr goes to `log_path`
    (and the driver's progress lines to the terminal)."""
    out_path = log_path + ".json"
    command = ["nice", "-n", "10", sys.executable, os.path.abspath(__file__), "--stage", stage,
               "--spec", json.dumps(spec), "--stage-output", out_path]
    import resource

    start = time.perf_counter()
    cpu = _cpu_s(resource.RUSAGE_CHILDREN)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        for line in proc.stderr:
            log.write(line)
            if line.startswith("[sits]"):
                print(f"    {line.rstrip()}  (+{time.perf_counter() - start:.0f} s)",
                      flush=True)
        code = proc.wait()
    if code != 0:
        with open(log_path) as log:
            tail = log.read()[-4000:]
        raise RuntimeError(f"stage {stage} failed (exit {code}); log {log_path}:\n{tail}")
    with open(out_path) as f:
        result = json.load(f)
    # Wall and CPU seconds of the whole child (interpreter start included).
    result["wall_s"] = time.perf_counter() - start
    result["cpu_s"] = _cpu_s(resource.RUSAGE_CHILDREN) - cpu
    return result


def _fmt_s(x):
    return "-" if x is None else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _fmt_mib(x):
    return "-" if x is None else f"{x:,.0f}"


def compile_again(row: dict) -> None:
    """One more compile of `row`'s configuration; row["compile"] keeps the
    fastest. Each starts with the files written before on disk (sync,
    untimed): the kernel would otherwise slow this compile's writes down
    while it flushes the previous one's artifact."""
    os.sync()
    run = run_stage("compile", row["compile_spec"], row["compile_log"])
    row["compile_runs"].append(run["seconds"])
    if "compile" not in row or run["seconds"] < row["compile"]["seconds"]:
        row["compile"] = run


def measure(shape: dict, args, kv_cache: str, workdir: str, label: str,
            load: bool = True, check: bool = True, export: dict | None = None,
            repeat: int | None = None) -> dict:
    """Exports (unless `export` has the result), compiles (`repeat` times,
    default --repeat), loads and checks one configuration; returns the
    stage results."""
    os.makedirs(workdir, exist_ok=True)
    onnx_path = os.path.join(workdir, "llama.onnx")
    params = parameter_count(shape)
    external = args.external_data == "always" or (
        args.external_data == "auto" and params > EXTERNAL_ABOVE)
    synthesize = args.synthesize == "always" or (
        args.synthesize == "auto" and args.shape == "llama7b")
    spec = {"shape": shape, "onnx": onnx_path, "external_data": external,
            "dtype": args.dtype or ("float16" if args.shape == "llama7b" else "float32"),
            "synthesize": synthesize and shape["layers"] > EXPORTED_LAYERS,
            "serve_tokens": args.serve_tokens, "precision": args.precision,
            "outline_layers": not args.no_outline_layers,
            "artifact": os.path.join(workdir, f"llama-{kv_cache}.sitsm"),
            "target": args.target, "threads": args.threads, "kv_cache": kv_cache,
            "block_size": args.block_size, "pass_timing": args.pass_timing,
            "dump_ir": os.path.join(args.dump_ir, f"{label}-{kv_cache}".replace(" ", "-"))
            if args.dump_ir
            else None}
    row = {"label": label, "kv_cache": kv_cache, "shape": shape}
    if export is None:
        print(f"[{label}] export ({params / 1e6:.1f} M parameters, {spec['dtype']}"
              f"{', external data' if external or spec['synthesize'] else ''}"
              f"{', layers synthesized' if spec['synthesize'] else ''}) ...", flush=True)
        export = run_stage("export", spec, os.path.join(workdir, "export.log"))
    row["export"] = export
    print(f"[{label}] compile ({kv_cache}, {args.target}) ...", flush=True)
    log = os.path.join(workdir, f"compile-{kv_cache}.log")
    # The least of --repeat runs: a stage's time on a shared machine only
    # ever grows with noise. Each starts with the files written before on
    # disk (sync, untimed): the kernel would otherwise slow this compile's
    # writes down while it flushes the previous one's artifact.
    row["compile_spec"] = spec
    row["compile_log"] = log
    row["compile_runs"] = []
    for _ in range(max(1, args.repeat if repeat is None else repeat)):
        compile_again(row)
    if args.pass_timing:
        with open(log) as f:
            row["pass_timing"] = parse_pass_timing(f.read())
    if load:
        print(f"[{label}] load ...", flush=True)
        row["load"] = run_stage("load", spec, os.path.join(workdir, f"load-{kv_cache}.log"))
    if args.serve_tokens:
        print(f"[{label}] serve {args.serve_tokens} tokens ...", flush=True)
        row["serve"] = run_stage("serve", spec, os.path.join(workdir, f"serve-{kv_cache}.log"))
    row["dtype"] = spec["dtype"]
    row["precision"] = args.precision
    if check and not args.skip_ort:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            print("onnxruntime is not installed: no correctness check", flush=True)
        else:
            print(f"[{label}] check against onnxruntime ...", flush=True)
            row["check"] = run_stage("check", spec,
                                     os.path.join(workdir, f"check-{kv_cache}.log"))
    if args.dump_ir:
        row["ir"] = {k: ir_stats(os.path.join(spec["dump_ir"], f"{k}.mlir"))
                     for k in ("before", "after")}
        if args.llvm_timing:
            row["llvm"] = llvm_timing(os.path.join(spec["dump_ir"], "after-llvm.mlir"), args)
    if not args.keep:
        for f in (spec["artifact"],):
            if os.path.exists(f):
                os.remove(f)
    return row


# ------------------------------------------------------------------ IR statistics
_OP = re.compile(r"^\s*(?:%[^=]+=\s*)?\"?([a-z_][\w]*\.[\w.]+)\"?[\s(<{]")


def ir_stats(path: str) -> dict:
    """Op counts of an MLIR file (textual form, one op per line), per op
    name and per function."""
    ops = collections.Counter()
    per_func = collections.Counter()
    func = None
    lines = 0
    with open(path) as f:
        for line in f:
            lines += 1
            m = _OP.match(line)
            if not m:
                continue
            name = m.group(1)
            if name in ("func.func", "llvm.func"):
                fm = re.search(r"@([\w$.]+)", line)
                func = fm.group(1) if fm else "?"
            ops[name] += 1
            if func:
                per_func[func] += 1
    return {"bytes": os.path.getsize(path), "lines": lines, "ops": sum(ops.values()),
            "top_ops": ops.most_common(15),
            "functions": sum(v for k, v in ops.items() if k in ("func.func", "llvm.func")),
            "top_functions": per_func.most_common(8)}


def _tool(package: str, name: str) -> str | None:
    """`name` from the LLVM/MLIR tools wheels (the LLVM SITS is built with),
    else from PATH."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "bin", name)
        if os.path.exists(path):
            return path
    return shutil.which(name)


def _time_passes(text: str) -> list[tuple[str, float]]:
    """LLVM -time-passes report: (pass, wall seconds), largest first."""
    rows = []
    in_table = False
    for line in text.splitlines():
        if "--Wall Time--" in line:
            in_table = True
            continue
        if in_table:
            nums = re.findall(r"([\d.]+) \(\s*[\d.]+%\)", line)
            if not nums:
                if line.strip().startswith("==="):
                    in_table = False
                continue
            name = re.split(r"\)\s{2,}", line)[-1].strip()
            if name.startswith("Total"):
                in_table = False
                continue
            rows.append((name, float(nums[-1])))
    return sorted(rows, key=lambda r: -r[1])


def llvm_timing(after_mlir: str, args) -> dict:
    """mlir-translate, opt -O3 and llc -O3 on the lowered module, timed
    separately (what emit_object does in one process)."""
    from sits_mlir import targets

    translate = _tool("mlir", "mlir-translate")
    opt, llc = _tool("llvm", "opt"), _tool("llvm", "llc")
    if not (translate and opt and llc):
        return {"error": "mlir-translate, opt or llc not found"}
    t = targets.lookup(args.target)
    work = os.path.dirname(after_mlir)
    ll, opt_ll, obj = (os.path.join(work, n) for n in ("module.ll", "opt.ll", "module.o"))
    result = {}

    def timed(command, key):
        start = time.perf_counter()
        done = subprocess.run(["nice", "-n", "10"] + command, capture_output=True, text=True)
        result[key] = time.perf_counter() - start
        if done.returncode:
            raise RuntimeError(f"{command[0]} failed:\n{done.stderr[-3000:]}")
        return done.stderr

    timed([translate, "--mlir-to-llvmir", after_mlir, "-o", ll], "translate_s")
    cpu_flags = [f"-mtriple={t.triple}", f"-mcpu={t.chip}", f"-mattr={t.features}"]
    result["opt_passes"] = _time_passes(timed(
        [opt, "-O3", *cpu_flags, "-time-passes", ll, "-S", "-o", opt_ll], "opt_s"))[:10]
    result["llc_passes"] = _time_passes(timed(
        [llc, "-O3", *cpu_flags, "-relocation-model=pic", "-filetype=obj", "-time-passes",
         opt_ll, "-o", obj], "llc_s"))[:10]
    result["ll_bytes"] = os.path.getsize(ll)
    result["opt_ll_bytes"] = os.path.getsize(opt_ll)
    result["object_bytes"] = os.path.getsize(obj)
    with open(ll) as f:
        text = f.read()
    result["ll_instructions"] = len(re.findall(r"^\s+(?:%\S+ = )?[a-z]", text, re.M))
    with open(opt_ll) as f:
        text = f.read()
    result["opt_ll_instructions"] = len(re.findall(r"^\s+(?:%\S+ = )?[a-z]", text, re.M))
    result["opt_ll_functions"] = len(re.findall(r"^define ", text, re.M))
    return result


# ------------------------------------------------------------------ reports
def print_rows(rows: list[dict]) -> None:
    print("\n| model | KV | params | export s | export peak MiB | ONNX MiB | compile s | "
          "compile CPU s | compile peak MiB (anon) | artifact MiB | load s | "
          "RSS after load MiB (anon / file) | prefill / decode rel err |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        e, c, ld, ck = r["export"], r["compile"], r.get("load"), r.get("check")
        load_rss = (f"{_fmt_mib(ld['rss_mib'])} ({_fmt_mib(ld['anon_mib'])} / "
                    f"{_fmt_mib(ld['file_mib'])})" if ld else "-")
        err = f"{ck['prefill_rel']:.1e} / {ck['decode_rel']:.1e}" if ck else "-"
        print(f"| {r['label']} | {r['kv_cache']} | {e['params'] / 1e6:.1f} M | "
              f"{_fmt_s(e['seconds'])} | {_fmt_mib(e['peak_mib'])} | "
              f"{_mib(e['onnx_bytes']):,.1f} | {_fmt_s(c['seconds'])} | {_fmt_s(c['cpu_s'])} | "
              f"{_fmt_mib(c['peak_mib'])} ({_fmt_mib(c.get('peak_anon_mib'))}) | "
              f"{_mib(c['artifact_bytes']):,.1f} | "
              f"{_fmt_s(ld['seconds']) if ld else '-'} | {load_rss} | {err} |")
    print("\nCompile stages (wall s / CPU s / peak RSS MiB / peak anonymous RSS MiB during "
          "the stage; codegen = "
          "weight_views + emit_objects, i.e. LLVM translate + O3 + object emission on every core):\n")
    names = []
    for r in rows:
        for n in r["compile"]["stages"]:
            if n not in names:
                names.append(n)
    print("| model | KV | " + " | ".join(names) + " | weight_views s | emit_objects s |")
    print("|---|---|" + "---:|" * (len(names) + 2))
    for r in rows:
        st, nat = r["compile"]["stages"], r["compile"]["native"]
        cells = [f"{_fmt_s(st[n]['seconds'])} / {_fmt_s(st[n]['cpu_s'])} / "
                 f"{_fmt_mib(st[n]['peak_mib'])} / {_fmt_mib(st[n].get('peak_anon_mib'))}"
                 if n in st
                 else "-" for n in names]
        print(f"| {r['label']} | {r['kv_cache']} | " + " | ".join(cells) +
              f" | {_fmt_s(nat.get('weight_views'))} | {_fmt_s(nat.get('emit_objects'))} |")
    served = [r for r in rows if "serve" in r]
    if served:
        print("\nServing (SITS alone, 1 sequence: load, prefill of "
              f"{PROMPT} tokens, greedy decode steps):\n")
        print("| model | KV | dtype | load s | prefill s | decode s/token (median) | "
              "tokens | RSS MiB (anon) | logits finite |")
        print("|---|---|---|---:|---:|---:|---|---:|---|")
        for r in served:
            v = r["serve"]
            times = sorted(v["decode_s"])
            median = times[len(times) // 2] if times else None
            print(f"| {r['label']} | {r['kv_cache']} | {r['dtype']} | {_fmt_s(v['load_s'])} | "
                  f"{_fmt_s(v['prefill_s'])} | {_fmt_s(median)} | {v['tokens']} | "
                  f"{_fmt_mib(v['rss_mib'])} ({_fmt_mib(v['anon_mib'])}) | {v['finite']} |")


def print_pass_timing(row: dict, top: int = 10) -> None:
    timing = row.get("pass_timing")
    if not timing:
        return
    leaves = [t for t in timing if not t["name"].endswith("Pipeline")
              and not t["name"].startswith("(A)")]
    total = sum(t["wall"] for t in leaves) or 1.0
    print(f"\nMLIR pass timing, {row['label']} {row['kv_cache']}: top {top} pass runs by wall "
          f"time (sum of pass runs {total:.1f} s)\n")
    print("| # in pipeline | pass | wall s | % |")
    print("|---:|---|---:|---:|")
    for t in sorted(leaves, key=lambda t: -t["wall"])[:top]:
        print(f"| {t['index']} | {t['name']} | {t['wall']:.2f} | {100 * t['wall'] / total:.1f} |")
    by_name = collections.Counter()
    for t in leaves:
        by_name[t["name"]] += t["wall"]
    print(f"\nsummed by pass name (top {top}):\n")
    print("| pass | wall s | % |")
    print("|---|---:|---:|")
    for name, wall in by_name.most_common(top):
        print(f"| {name} | {wall:.2f} | {100 * wall / total:.1f} |")


def print_ir(row: dict) -> None:
    ir = row.get("ir")
    if not ir:
        return
    for key in ("before", "after"):
        s = ir[key]
        print(f"\nIR {key} the pipeline ({row['label']} {row['kv_cache']}): {s['ops']:,} ops, "
              f"{s['functions']} functions, {_mib(s['bytes']):.1f} MiB text")
        print("  top ops: " + ", ".join(f"{n} {c:,}" for n, c in s["top_ops"]))
        print("  ops per function: " + ", ".join(f"{n} {c:,}" for n, c in s["top_functions"]))
    llvm = row.get("llvm")
    if llvm:
        if "error" in llvm:
            print(f"\nLLVM timing: {llvm['error']}")
            return
        print(f"\nLLVM (separately): mlir-translate {llvm['translate_s']:.1f} s, opt -O3 "
              f"{llvm['opt_s']:.1f} s, llc -O3 {llvm['llc_s']:.1f} s; LLVM IR "
              f"{llvm['ll_instructions']:,} instructions before O3, "
              f"{llvm['opt_ll_instructions']:,} after ({llvm['opt_ll_functions']} functions), "
              f"object {_mib(llvm['object_bytes']):.1f} MiB")
        for key in ("opt_passes", "llc_passes"):
            print(f"  {key}: " + "; ".join(f"{n} {w:.2f} s" for n, w in llvm[key]))


def print_sweep(rows: list[dict]) -> None:
    print("\nCompile seconds against layer count (same shape otherwise):\n")
    names = []
    for r in rows:
        for n in r["compile"]["stages"]:
            if n not in names:
                names.append(n)
    print("| layers | params | compile s | CPU s | s / layer | " +
          " | ".join(f"{n} s" for n in names) + " | emit_objects s | compile peak MiB | "
          "artifact MiB |")
    print("|---:|---:|---:|---:|---:|" + "---:|" * (len(names) + 3))
    for r in rows:
        c, layers = r["compile"], r["shape"]["layers"]
        print(f"| {layers} | {r['export']['params'] / 1e6:.1f} M | {_fmt_s(c['seconds'])} | "
              f"{_fmt_s(c['cpu_s'])} | "
              f"{c['seconds'] / layers:.1f} | " +
              " | ".join(_fmt_s(c["stages"][n]["seconds"]) if n in c["stages"] else "-"
                         for n in names) +
              f" | {_fmt_s(c['native'].get('emit_objects'))} | {_fmt_mib(c['peak_mib'])} | "
              f"{_mib(c['artifact_bytes']):,.1f} |")
    if any(len(r.get("compile_runs", ())) > 1 for r in rows):
        print("\ncompile s is the least of " + "; ".join(
            f"L{r['shape']['layers']}: " + ", ".join(f"{t:.2f}" for t in r["compile_runs"])
            for r in rows) + " s")
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        dl = b["shape"]["layers"] - a["shape"]["layers"]
        if dl:
            slope = (b["compile"]["seconds"] - a["compile"]["seconds"]) / dl
            growth = b["compile"]["seconds"] / a["compile"]["seconds"] - 1
            print(f"\ngrowth: {100 * growth:+.1f}% from {a['shape']['layers']} to "
                  f"{b['shape']['layers']} layers; marginal cost {slope:.3f} s per extra layer, "
                  f"intercept {a['compile']['seconds'] - a['shape']['layers'] * slope:.2f} s")
            runs_a, runs_b = a.get("compile_runs", ()), b.get("compile_runs", ())
            if len(runs_a) > 1 and len(runs_b) > 1:
                # One fast outlier moves the least of N; the median less so.
                import statistics

                median = statistics.median(runs_b) / statistics.median(runs_a) - 1
                print(f"growth of the medians: {100 * median:+.1f}%")
            wa, wb = a["compile"].get("written_bytes"), b["compile"].get("written_bytes")
            if wa and wb:
                # Noise-free: what the compile writes grows with the weights.
                print(f"bytes written by the compile: {_mib(wa):,.0f} -> {_mib(wb):,.0f} MiB "
                      f"({100 * (wb / wa - 1):+.1f}%; artifacts {_mib(a['compile']['artifact_bytes']):,.0f}"
                      f" -> {_mib(b['compile']['artifact_bytes']):,.0f} MiB)")


# ------------------------------------------------------------------ main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", choices=tuple(SHAPES), default="small")
    for key in ("layers", "hidden", "heads", "kv-heads", "ffn", "vocab"):
        p.add_argument(f"--{key}", type=int, help="override the shape's value")
    p.add_argument("--positions", type=int, default=2048, help="max_position_embeddings")
    p.add_argument("--kv-cache", choices=("contiguous", "paged", "both"), default="contiguous")
    p.add_argument("--block-size", type=int, default=16, help="kv_cache=paged block size")
    p.add_argument("--target", default="x86-64-v3")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--external-data", choices=("auto", "always", "never"), default="auto",
                   help=f"ONNX external data (auto: above {EXTERNAL_ABOVE / 1e6:.0f} M params)")
    p.add_argument("--workdir", help="where models and artifacts go (default: a temporary "
                                     "folder, removed)")
    p.add_argument("--keep", action="store_true", help="keep the artifacts")
    p.add_argument("--skip-ort", action="store_true", help="no onnxruntime check")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"),
                   help="the model's weights, activations and KV cache (default float32; "
                        "float16 for llama7b)")
    p.add_argument("--synthesize", choices=("auto", "always", "never"), default="auto",
                   help=f"export {EXPORTED_LAYERS} layers through torch and repeat the last "
                        "in the graph with random weights streamed to external data "
                        "(auto: llama7b)")
    p.add_argument("--precision", choices=("fp32", "int8", "int4", "auto"), default="fp32",
                   help="weight precision (sits_mlir.compile's precision=)")
    p.add_argument("--no-outline-layers", action="store_true",
                   help="compile every layer inline (outline_layers=False), to compare")
    p.add_argument("--serve-tokens", type=int, default=0,
                   help="after loading, one prefill and this many greedy decode steps "
                        "(SITS alone; seconds per step)")
    p.add_argument("--skip-load", action="store_true")
    p.add_argument("--layers-sweep", help="comma-separated layer counts, e.g. 2,4,8")
    p.add_argument("--repeat", type=int, default=1,
                   help="compile each configuration this many times and report the fastest")
    p.add_argument("--pass-timing", action="store_true", help="MLIR pass timing of the compile")
    p.add_argument("--dump-ir", help="folder for the IR before and after the pipeline")
    p.add_argument("--llvm-timing", action="store_true",
                   help="with --dump-ir: time mlir-translate / opt / llc separately")
    p.add_argument("--json", help="also write every result to this file")
    p.add_argument("--stage", choices=tuple(STAGES), help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    p.add_argument("--stage-output", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.stage:
        spec = json.loads(args.spec)
        result = STAGES[args.stage](spec)
        result.setdefault("peak_mib", _status()["VmHWM"])
        with open(args.stage_output, "w") as f:
            json.dump(result, f)
        return 0
    if args.llvm_timing and not args.dump_ir:
        p.error("--llvm-timing needs --dump-ir")

    shape = resolve_shape(args)
    kv_modes = ("contiguous", "paged") if args.kv_cache == "both" else (args.kv_cache,)
    tmp = None
    workdir = args.workdir
    if workdir is None:
        tmp = workdir = tempfile.mkdtemp(prefix="sits-compile-scale-")
    rows = []
    try:
        if args.layers_sweep:
            counts = [int(x) for x in args.layers_sweep.split(",") if x]
            for kv_cache in kv_modes:
                sweep = []
                for layers in counts:
                    s = dict(shape, layers=layers)
                    label = f"h{s['hidden']}-v{s['vocab']}-L{layers}"
                    sweep.append(measure(s, args, kv_cache, os.path.join(workdir, label), label,
                                         load=not args.skip_load, check=not args.skip_ort,
                                         repeat=1))
                    print_sweep(sweep)
                # The other --repeat compiles take turns between the counts,
                # so that a machine's drift weighs on all of them alike.
                for _ in range(max(1, args.repeat) - 1):
                    for row in sweep:
                        print(f"[{row['label']}] compile again ...", flush=True)
                        compile_again(row)
                if args.repeat > 1:
                    print_sweep(sweep)
                rows += sweep
            print_rows(rows)
            for kv_cache in kv_modes:
                print(f"\n{kv_cache}:")
                print_sweep([r for r in rows if r["kv_cache"] == kv_cache])
        else:
            label = (f"{args.shape}" if args.shape != "custom" else "custom") + \
                f" h{shape['hidden']} L{shape['layers']} v{shape['vocab']}" + \
                (f" {args.precision}" if args.precision != "fp32" else "")
            sub = os.path.join(workdir, label.replace(" ", "-"))
            export = None
            for kv_cache in kv_modes:
                row = measure(shape, args, kv_cache, sub, label, load=not args.skip_load,
                              check=not args.skip_ort, export=export)
                export = row["export"]
                rows.append(row)
            print_rows(rows)
        for r in rows:
            print_pass_timing(r)
            print_ir(r)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    finally:
        if tmp and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    # fp16 graphs round at different points than onnxruntime's fp32 kernels.
    bad = [r for r in rows if "check" in r and
           max(r["check"]["prefill_rel"], r["check"]["decode_rel"]) >
           (1e-4 if r["dtype"] == "float32" and r["precision"] == "fp32" else 5e-2)]
    bad += [r for r in rows if "serve" in r and not r["serve"]["finite"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
