#!/usr/bin/env python3
"""The CPU decode benchmark of record: SITS's engine against the engines
users run, on one Llama-shaped decoder and the same prompts.

The decoder is built from a `transformers` config with seeded random
weights (no download: HF_HUB_OFFLINE=1) and saved as a Hugging Face model
folder (safetensors, and a byte-fallback BPE tokenizer over the vocabulary
so that every converter accepts the folder). Every engine starts from that
folder, the way its users prepare a model:

* ``sits``: the folder's decoder exported to ONNX with its KV cache
  (sits_mlir.compiler.hf), compiled with ``kv_cache="paged"``,
  ``logits="last"`` and served by `sits_mlir.runtime.engine` over the paged
  pool; ``sits-int8`` / ``sits-int4`` compile it with that weight precision;
  ``sits-kv8``, ``sits-int8-kv8`` and ``sits-int4-kv8`` also store the KV
  cache as INT8 with a scale per token and head (``kv_dtype="int8"``; the
  others keep it in f32, llama.cpp in f16);
* ``ort``: onnxruntime on the same exported ONNX, contiguous past K/V;
* ``genai-fp32`` / ``genai-int4``: onnxruntime-genai, its model builder
  run on the folder;
* ``ct2-fp32`` / ``ct2-int8``: CTranslate2, converted from the folder;
* ``llama-f32`` / ``llama-q8_0`` / ``llama-q4_0``: llama.cpp through
  llama-cpp-python's C API, the GGUF written by llama.cpp's own
  ``convert_hf_to_gguf.py`` (from the source release of the installed
  llama-cpp-python: ``$SITS_LLAMA_CPP_SRC``, or downloaded once into the
  work folder) and quantized by its quantizer. On hosts with AMX, llama.cpp
  built with ``-march=native`` by GCC 12 crashes in its AMX kernels for
  quantized weights: those models load with its extra buffer types off
  (``use_extra_bufts=false``), and the report says so.

Each (engine, batch) runs in a process of its own, as a user serves one
model. A run prefills `--batch` prompts of `--prompt-len` random tokens
together and decodes `--new-tokens` greedy tokens for each (no end token);
the best of `--repeat` runs counts. Reported per engine and batch: decode
tokens/s (the tokens after each sequence's first, over the time from the
last first token to the end), time to first token (submitting the prompts
until every sequence has its first token), the process's peak resident
set, and at batch 1 the fraction of the bandwidth roofline: weight bytes
read per token (every weight but the embedding table, at the engine's
precision, block scales included) over the measured bandwidth of a
streaming read of an array bigger than the weights, with every thread.
fp32 engines' batch-1 greedy tokens are compared with `transformers`'.

    pip install -e '.[bench]'
    python test/bench/llm_peers.py --shape small
    python test/bench/llm_peers.py --shape tinyllama --new-tokens 32 --workdir /data/peers

Models are prepared once per --workdir (reused when present). A benchmark,
not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compile_scale  # noqa: E402  (shapes, the ONNX export with external data)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: Engine -> weight precision (the peers it is compared with share it).
ENGINES = {
    "sits": "fp32", "ort": "fp32", "genai-fp32": "fp32", "ct2-fp32": "fp32",
    "llama-f32": "fp32",
    "sits-int8": "int8", "ct2-int8": "int8", "llama-q8_0": "int8",
    "sits-int4": "int4", "genai-int4": "int4", "llama-q4_0": "int4",
    "sits-kv8": "fp32", "sits-int8-kv8": "int8", "sits-int4-kv8": "int4",
}
#: SITS engines' KV pool element type (compile's kv_dtype; default: f32).
SITS_KV = {"sits-kv8": "int8", "sits-int8-kv8": "int8", "sits-int4-kv8": "int8"}
#: Bits read per weight, block scales included (llama.cpp's q8_0 / q4_0:
#: 34 / 18 bytes per 32 weights; SITS's and onnxruntime-genai's int4 carry
#: a scale per group as well).
BITS = {"fp32": 32.0, "int8": 8.5, "int4": 4.5}
BLOCK = 16  # SITS's KV block size (tokens)


# ------------------------------------------------------------------ preparation
def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _tokenizer(folder: str, vocab: int) -> None:
    """A Llama-style byte-fallback BPE tokenizer covering `vocab` ids:
    <unk> <s> </s>, the 256 byte tokens, then made-up pieces. The benchmark
    feeds token ids; the converters only need a tokenizer they accept."""
    from tokenizers import Tokenizer, decoders, models, normalizers
    from transformers import PreTrainedTokenizerFast

    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += [f"\u2581t{i}" for i in range(vocab - len(pieces))]
    tok = Tokenizer(models.BPE(vocab={p: i for i, p in enumerate(pieces)}, merges=[],
                               unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(folder)


def prepare_hf(shape: dict, work: str, prompts: np.ndarray, new_tokens: int,
               seed: int = 0) -> dict:
    """The model folder, the exported ONNX and transformers' greedy tokens
    for the first prompt."""
    folder, onnx_path = os.path.join(work, "hf"), os.path.join(work, "onnx", "model.onnx")
    meta_path = os.path.join(work, "hf.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta["shape"] == shape and meta["new_tokens"] >= new_tokens \
                and meta["prompt"] == prompts[0].tolist():
            return meta
    import torch
    import transformers

    _log("[prepare] transformers model folder and ONNX export ...")
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"], hidden_size=shape["hidden"],
        intermediate_size=shape["ffn"], vocab_size=shape["vocab"],
        max_position_embeddings=shape["positions"], tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(cfg).eval()
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    _tokenizer(folder, shape["vocab"])
    with torch.no_grad():
        out = model.generate(torch.tensor(prompts[:1]), max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    reference = out[0, prompts.shape[1]:].tolist()
    model.config._attn_implementation = "eager"
    os.makedirs(os.path.dirname(onnx_path), exist_ok=True)
    external = compile_scale.parameter_count(shape) > compile_scale.EXTERNAL_ABOVE
    target = os.path.join(work, "onnx-tmp", "model.onnx") if external else onnx_path
    os.makedirs(os.path.dirname(target), exist_ok=True)
    compile_scale.hf_decoders.export(model, target, shape["layers"], shape["kv_heads"],
                                     shape["head_dim"])
    del model
    if external:
        compile_scale.resave_external(target, onnx_path)
    meta = {"shape": shape, "new_tokens": new_tokens, "prompt": prompts[0].tolist(),
            "reference": reference, "folder": folder, "onnx": onnx_path}
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    for stale in ("sits", "genai", "ct2", "gguf"):
        shutil.rmtree(os.path.join(work, stale), ignore_errors=True)
    return meta


def _tool(argv: list, log: str) -> None:
    """Runs a peer's converter with its output in `log`; a failure raises
    RuntimeError naming the log and its last line."""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w") as f:
        code = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT).returncode
    if code != 0:
        with open(log, errors="replace") as f:
            last = (f.read().strip().splitlines() or [""])[-1]
        raise RuntimeError(f"{argv[1:3]} failed (exit {code}, see {log}): {last}")


def _done(path: str) -> bool:
    return os.path.exists(path + ".done")


def _mark(path: str) -> None:
    open(path + ".done", "w").close()


def prepare_sits(meta: dict, work: str, precision: str, threads: int,
                 kv_dtype: str | None = None) -> str:
    import sits_mlir

    from sits_mlir.testing.onnx_backend import compiler_fingerprint

    name = precision + (f"-kv-{kv_dtype}" if kv_dtype else "")
    out = os.path.join(work, "sits", f"{name}.sitsm")
    # A compile is reused only by the compiler that made it.
    stamp = out + ".compiler"
    fingerprint = compiler_fingerprint()
    current = os.path.exists(stamp) and open(stamp).read() == fingerprint
    if not (_done(out) and current):
        _log(f"[prepare] SITS compile ({name}, paged) ...")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        sits_mlir.compile(meta["onnx"], "cpu", out, kv_cache="paged", kv_block_size=BLOCK,
                          kv_dtype=kv_dtype, logits="last", precision=precision,
                          threads=threads)
        with open(stamp, "w") as f:
            f.write(fingerprint)
        _mark(out)
    return out


def prepare_genai(meta: dict, work: str, precision: str, threads: int) -> str:
    out = os.path.join(work, "genai", precision)
    if not _done(out):
        _log(f"[prepare] onnxruntime-genai model builder ({precision}) ...")
        shutil.rmtree(out, ignore_errors=True)
        _tool([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", meta["folder"],
               "-o", out, "-p", precision, "-e", "cpu",
               "-c", os.path.join(work, "genai", "cache")], out + ".log")
        config_path = os.path.join(out, "genai_config.json")
        with open(config_path) as f:
            config = json.load(f)
        options = config["model"]["decoder"].setdefault("session_options", {})
        options["intra_op_num_threads"] = threads
        with open(config_path, "w") as f:
            json.dump(config, f, indent=2)
        _mark(out)
    return out


def prepare_ct2(meta: dict, work: str, quantization: str) -> str:
    out = os.path.join(work, "ct2", quantization)
    if not _done(out):
        import ctranslate2

        _log(f"[prepare] CTranslate2 conversion ({quantization}) ...")
        shutil.rmtree(out, ignore_errors=True)
        ctranslate2.converters.TransformersConverter(meta["folder"]).convert(
            out, quantization=quantization, force=True)
        _mark(out)
    return out


def llama_cpp_source(work: str) -> str:
    """A llama.cpp source tree with convert_hf_to_gguf.py, of the installed
    llama-cpp-python's release."""
    env = os.environ.get("SITS_LLAMA_CPP_SRC")
    if env:
        return env
    import llama_cpp

    root = os.path.join(work, "llama.cpp-src")
    script = os.path.join(root, "convert_hf_to_gguf.py")
    if os.path.exists(script):
        return root
    _log(f"[prepare] llama.cpp's converter (llama-cpp-python {llama_cpp.__version__} "
         "source release) ...")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                        ":all:", "-d", tmp, f"llama-cpp-python=={llama_cpp.__version__}"],
                       check=True, stdout=subprocess.DEVNULL)
        (sdist,) = glob.glob(os.path.join(tmp, "*.tar.gz"))
        with tarfile.open(sdist) as tar:
            prefix = tar.getnames()[0].split("/")[0] + "/vendor/llama.cpp/"
            wanted = [m for m in tar.getmembers() if m.name.startswith(prefix) and (
                m.name == prefix + "convert_hf_to_gguf.py"
                or m.name.startswith(prefix + "gguf-py/")
                or m.name.startswith(prefix + "conversion/"))]
            for m in wanted:
                m.name = m.name[len(prefix):]
            tar.extractall(root, members=wanted, filter="data")
    return root


def prepare_gguf(meta: dict, work: str, kind: str, threads: int) -> str:
    out = os.path.join(work, "gguf", f"{kind}.gguf")
    if _done(out):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if kind == "f32":
        _log("[prepare] GGUF (llama.cpp's convert_hf_to_gguf.py, f32) ...")
        src = llama_cpp_source(work)
        _tool([sys.executable, os.path.join(src, "convert_hf_to_gguf.py"), meta["folder"],
               "--outfile", out, "--outtype", "f32"], out + ".log")
    else:
        import ctypes

        import llama_cpp

        base = prepare_gguf(meta, work, "f32", threads)
        _log(f"[prepare] GGUF {kind} (llama.cpp's quantizer) ...")
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
                        "q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0}[kind]
        params.nthread = threads
        if llama_cpp.llama_model_quantize(base.encode(), out.encode(), ctypes.byref(params)):
            raise RuntimeError(f"llama.cpp could not quantize {base} to {kind}")
    _mark(out)
    return out


def prepare(engine: str, meta: dict, work: str, threads: int) -> str:
    if engine.startswith("sits"):
        return prepare_sits(meta, work, ENGINES[engine], threads, SITS_KV.get(engine))
    if engine == "ort":
        return meta["onnx"]
    if engine.startswith("genai"):
        return prepare_genai(meta, work, engine.split("-")[1], threads)
    if engine.startswith("ct2"):
        return prepare_ct2(meta, work, {"fp32": "float32", "int8": "int8"}[ENGINES[engine]])
    return prepare_gguf(meta, work, engine.split("-")[1], threads)


def available(engine: str) -> str | None:
    """Why `engine` cannot run here (a missing package), or None."""
    module = {"ort": "onnxruntime", "genai": "onnxruntime_genai", "ct2": "ctranslate2",
              "llama": "llama_cpp"}.get(engine.split("-")[0])
    if module is None:
        return None
    import importlib.util

    if importlib.util.find_spec(module) is None:
        return f"{module} is not installed (pip install -e '.[bench]')"
    return None


def bandwidth_gbs(n_bytes: int, threads: int, repeats: int = 3) -> float:
    """GB/s of a streaming read (an OR-reduction) of `n_bytes`, split
    over `threads` threads."""
    data = np.ones(n_bytes // 8, np.uint64)
    chunks = np.array_split(data, threads)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        def read():
            list(pool.map(np.bitwise_or.reduce, chunks))
        read()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            read()
            best = min(best, time.perf_counter() - start)
    return n_bytes / best / 1e9


# ------------------------------------------------------------------ running
def _has_amx() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "amx_tile" in f.read()
    except OSError:
        return False


class _Run:
    """One generation: seconds to every first token, decode seconds after
    it, the first sequence's tokens."""

    def __init__(self, ttft: float, decode: float, tokens: list):
        self.ttft, self.decode, self.tokens = ttft, decode, [int(t) for t in tokens]


def _run_sits(path, spec, prompts, new_tokens):
    from sits_mlir import runtime
    from sits_mlir.runtime import kv
    from sits_mlir.runtime.decoder import PagedRunner
    from sits_mlir.runtime.engine import GREEDY, Engine
    from sits_mlir.tools.runtime import decoder_geometry

    runtime.set_num_threads(spec["threads"])
    model = runtime.load(path)
    s = spec["shape"]
    blocks = -(-(prompts.shape[1] + new_tokens) // BLOCK)
    # The pool's element type is the model's (f32, or a quantized kv_dtype).
    geometry = decoder_geometry(model)
    pool = kv.KVAllocator(num_blocks=len(prompts) * blocks + 1, block_size=BLOCK,
                          num_layers=s["layers"], num_kv_heads=s["kv_heads"],
                          head_dim=s["head_dim"], dtype=geometry["kv_dtype"],
                          quantization=geometry["kv_quantization"],
                          max_seq_len=blocks * BLOCK,
                          # Every run prefills its prompts, as the peers do.
                          enable_prefix_caching=False)
    engine = Engine(pool, PagedRunner(model, kv.KVMemory(pool)), max_batch_size=len(prompts))

    def once(n):
        ids = [engine.add_request(p, n, sampling=GREEDY) for p in prompts]
        start = time.perf_counter()
        while not all(engine.result(i).samples[0].tokens for i in ids):
            engine.step()  # the prefills, and every first token
        first = time.perf_counter()
        while engine.has_unfinished:
            engine.step()
        end = time.perf_counter()
        tokens = engine.result(ids[0]).samples[0].tokens
        for i in ids:
            engine.release(i)
        return _Run(first - start, end - first, tokens)
    return once


def _run_ort(path, spec, prompts, new_tokens):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = spec["threads"]
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    s = spec["shape"]

    def once(n):
        ids = prompts.astype(np.int64)
        past = [np.zeros((len(ids), s["kv_heads"], 0, s["head_dim"]), np.float32)
                for _ in range(2 * s["layers"])]
        position, tokens = 0, []
        start = time.perf_counter()
        first = None
        for _ in range(n):
            feeds = {"input_ids": ids, "position_ids": np.broadcast_to(
                np.arange(position, position + ids.shape[1]), ids.shape).astype(np.int64)}
            for i in range(s["layers"]):
                feeds[f"past_key_{i}"], feeds[f"past_value_{i}"] = past[2 * i], past[2 * i + 1]
            logits, *past = session.run(None, feeds)
            position += ids.shape[1]
            ids = logits[:, -1].argmax(-1).astype(np.int64)[:, None]
            tokens.append(int(ids[0, 0]))
            if first is None:
                first = time.perf_counter()
        return _Run(first - start, time.perf_counter() - first, tokens)
    return once


def _run_genai(path, spec, prompts, new_tokens):
    import onnxruntime_genai as og

    model = og.Model(path)

    def once(n):
        params = og.GeneratorParams(model)
        total = prompts.shape[1] + n
        params.set_search_options(do_sample=False, max_length=total, min_length=total,
                                  batch_size=len(prompts))
        generator = og.Generator(model, params)
        start = time.perf_counter()
        generator.append_tokens(prompts.astype(np.int32))
        generator.generate_next_token()
        first = time.perf_counter()
        while not generator.is_done():
            generator.generate_next_token()
        end = time.perf_counter()
        return _Run(first - start, end - first, generator.get_sequence(0)[prompts.shape[1]:])
    return once


def _run_ct2(path, spec, prompts, new_tokens):
    import ctranslate2

    generator = ctranslate2.Generator(path, device="cpu", intra_threads=spec["threads"],
                                      inter_threads=1)
    with open(os.path.join(path, "vocabulary.json")) as f:
        vocabulary = json.load(f)
    start_tokens = [[vocabulary[i] for i in p] for p in prompts]

    def once(n):
        firsts, last = {}, [0.0]

        def step(result):
            now = time.perf_counter()
            firsts.setdefault(result.batch_id, now)
            last[0] = now
            return False
        start = time.perf_counter()
        results = generator.generate_batch(start_tokens, max_length=n, min_length=n,
                                           include_prompt_in_result=False, sampling_topk=1,
                                           end_token=[], callback=step)
        first = max(firsts.values())
        return _Run(first - start, last[0] - first, results[0].sequences_ids[0])
    return once


def _run_llama(path, spec, prompts, new_tokens):
    import ctypes

    import llama_cpp as L

    L.llama_backend_init()
    global _quiet  # llama.cpp keeps the callback: it must outlive the call
    _quiet = L.llama_log_callback(lambda *a: None)
    L.llama_log_set(_quiet, ctypes.c_void_p())
    mp = L.llama_model_default_params()
    if spec.get("no_extra_bufts"):
        mp.use_extra_bufts = False
    model = L.llama_model_load_from_file(path.encode(), mp)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path}")
    batch, plen = prompts.shape
    cp = L.llama_context_default_params()
    cp.n_ctx = batch * (plen + new_tokens + 16)
    cp.n_batch = max(batch * plen, 512)
    cp.n_seq_max = batch
    cp.n_threads = cp.n_threads_batch = spec["threads"]
    ctx = L.llama_init_from_model(model, cp)
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    lb = L.llama_batch_init(batch * plen, 0, batch)

    def fill(rows):  # rows: (token, position, sequence, wants logits)
        lb.n_tokens = len(rows)
        for i, (tok, pos, seq, want) in enumerate(rows):
            lb.token[i], lb.pos[i], lb.n_seq_id[i] = tok, pos, 1
            lb.seq_id[i][0], lb.logits[i] = seq, want

    def argmax(index):
        return int(np.argmax(np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, index),
                                                   (n_vocab,))))

    def once(n):
        L.llama_memory_clear(L.llama_get_memory(ctx), True)
        start = time.perf_counter()
        fill([(int(prompts[s, t]), t, s, t == plen - 1)
              for s in range(batch) for t in range(plen)])
        if L.llama_decode(ctx, lb):
            raise RuntimeError("llama_decode failed (prefill)")
        last = [argmax(s * plen + plen - 1) for s in range(batch)]
        first = time.perf_counter()
        tokens = [last[0]]
        for step in range(1, n):
            fill([(last[s], plen + step - 1, s, True) for s in range(batch)])
            if L.llama_decode(ctx, lb):
                raise RuntimeError("llama_decode failed (decode)")
            last = [argmax(s) for s in range(batch)]
            tokens.append(last[0])
        return _Run(first - start, time.perf_counter() - first, tokens)
    return once


def measure(engine: str, spec: dict) -> dict:
    """Runs `engine` at spec['batch'] in this process: best of spec['repeat']
    runs after a short warm-up, and this process's peak resident set."""
    prompts = np.asarray(spec["prompts"], np.int64)[:spec["batch"]]
    n = spec["new_tokens"]
    make = {"sits": _run_sits, "ort": _run_ort, "genai": _run_genai, "ct2": _run_ct2,
            "llama": _run_llama}[engine.split("-")[0]]
    once = make(spec["path"], spec, prompts, n)
    once(2)
    runs = [once(n) for _ in range(spec["repeat"])]
    best_decode = min(r.decode for r in runs)
    return {"decode_tps": len(prompts) * (n - 1) / best_decode,
            "ttft_s": min(r.ttft for r in runs), "tokens": runs[0].tokens,
            "peak_rss": _peak_rss()}


def _peak_rss() -> int:
    """This process's peak resident set (VmHWM: since its exec, unlike
    ru_maxrss, which Linux carries over from the parent's fork)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _in_process_of_its_own(engine: str, spec: dict) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure", engine,
                               "--spec", f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ report
def _fmt(x, spec="{:.1f}"):
    return "-" if x is None else spec.format(x)


def report(rows: dict, batches: list, meta: dict, gbs: float, weight_params: int,
           notes: list) -> None:
    print(f"\nroofline: {gbs:.1f} GB/s streaming read; batch-1 bound (weights but the "
          f"embedding, {weight_params / 1e6:.1f} M): " + ", ".join(
              f"{p} {gbs * 1e9 / (weight_params * BITS[p] / 8):.1f} tok/s" for p in BITS))
    head = ["engine", "precision"] + [f"decode tok/s b{b}" for b in batches] + [
        f"TTFT s b{batches[-1]}", f"peak RSS MiB b{batches[-1]}", "roofline b1",
        "tokens = transformers"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * 2 + "---:|" * (len(head) - 3) + "---|")
    for engine, by_batch in rows.items():
        precision = ENGINES[engine]
        cells = [engine, precision]
        err = next((r["error"] for r in by_batch.values() if "error" in r), None)
        for b in batches:
            cells.append(_fmt(by_batch[b].get("decode_tps")))
        last = by_batch[batches[-1]]
        cells.append(_fmt(last.get("ttft_s"), "{:.2f}"))
        cells.append(_fmt(last["peak_rss"] / 2**20 if "peak_rss" in last else None, "{:,.0f}"))
        one = by_batch.get(1, {})
        bound = gbs * 1e9 / (weight_params * BITS[precision] / 8)
        cells.append(_fmt(one["decode_tps"] / bound * 100 if "decode_tps" in one else None,
                          "{:.0f}%"))
        ref = meta["reference"]
        if precision != "fp32" or "tokens" not in one:
            cells.append("")
        else:
            same = next((i for i, (a, b) in enumerate(zip(one["tokens"], ref)) if a != b),
                        min(len(one["tokens"]), len(ref)))
            cells.append("yes" if same == len(ref) else f"first {same} of {len(ref)}")
        print("| " + " | ".join(cells) + " |")
        if err:
            notes.append(f"{engine}: {err}")
    print("\nSITS against the best peer at its precision (tok/s: above 1 is faster; time to "
          "first token and peak RSS: below 1 is better):")
    for engine in rows:
        if not engine.startswith("sits"):
            continue
        precision = ENGINES[engine]
        peers = [e for e in rows if not e.startswith("sits") and ENGINES[e] == precision]
        if not peers:
            continue
        sits = rows[engine]
        parts = []
        for b in batches:
            best = max(peers, key=lambda e: rows[e][b].get("decode_tps", 0))
            if sits[b].get("decode_tps") and rows[best][b].get("decode_tps"):
                parts.append(f"b{b} {sits[b]['decode_tps'] / rows[best][b]['decode_tps']:.2f}x "
                             f"({best})")
        b = batches[-1]
        for key, what in (("ttft_s", "TTFT"), ("peak_rss", "peak RSS")):
            vals = [rows[e][b][key] for e in peers if key in rows[e][b]]
            if key in sits[b] and vals:
                parts.append(f"{what} b{b} {sits[b][key] / min(vals):.2f}x the best peer's")
        print(f"  {engine} ({precision}): " + "; ".join(parts))
    for note in notes:
        print(f"note: {note}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=("small", "tinyllama", "custom"), default="small")
    for key in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
        p.add_argument(f"--{key.replace('_', '-')}", dest=key, type=int,
                       help="override the shape's value")
    p.add_argument("--engines", default=",".join(ENGINES),
                   help=f"comma-separated, of {', '.join(ENGINES)}")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--workdir", help="where the prepared models go (default: a temporary "
                                     "folder, removed at the end)")
    p.add_argument("--json", help="also write every result to this file")
    p.add_argument("--prepare-only", action="store_true",
                   help="prepare the engines' models in --workdir and stop")
    p.add_argument("--measure", help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.measure:
        with open(args.spec) as f:
            print(json.dumps(measure(args.measure, json.load(f))))
        return 0

    args.positions = 2048
    shape = compile_scale.resolve_shape(args)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        p.error(f"unknown engines {unknown}; choose from {', '.join(ENGINES)}")
    if args.prepare_only and not args.workdir:
        p.error("--prepare-only needs --workdir (where the prepared models stay)")
    batches = [int(b) for b in args.batches.split(",")]
    work = args.workdir or tempfile.mkdtemp(prefix="sits-peers-")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(1)
    prompts = rng.integers(3, shape["vocab"], (max(batches), args.prompt_len))
    meta = prepare_hf(shape, work, prompts, args.new_tokens)
    meta["reference"] = meta["reference"][:args.new_tokens]

    notes, paths = [], {}
    for engine in engines:
        why = available(engine)
        if why:
            notes.append(f"{engine} skipped: {why}")
            continue
        try:
            paths[engine] = prepare(engine, meta, work, args.threads)
        except (subprocess.CalledProcessError, RuntimeError, OSError) as e:
            notes.append(f"{engine} skipped: preparing it failed: {e}")
    if args.prepare_only:
        for note in notes:
            print(f"note: {note}")
        return 0
    no_extra_bufts = _has_amx()
    if no_extra_bufts and any(e in paths for e in ("llama-q8_0", "llama-q4_0")):
        notes.append("AMX host: llama.cpp's quantized models were loaded with "
                     "use_extra_bufts=false (its AMX kernels crash when built with GCC 12)")

    embedding = shape["vocab"] * shape["hidden"]
    weight_params = compile_scale.parameter_count(shape) - embedding
    # Bigger than any cache and than the fp32 weights, up to 4 GiB.
    gbs = bandwidth_gbs(min(max(1 << 30, 2 * weight_params * 4), 4 << 30), args.threads)
    print(f"Llama {shape['layers']} layers, hidden {shape['hidden']}, heads "
          f"{shape['heads']}/{shape['kv_heads']}, FFN {shape['ffn']}, vocabulary "
          f"{shape['vocab']} ({compile_scale.parameter_count(shape) / 1e6:.1f} M parameters); "
          f"prompt {args.prompt_len}, {args.new_tokens} new tokens, {args.threads} threads, "
          f"best of {args.repeat}")
    rows = {}
    for engine in paths:
        rows[engine] = {}
        for b in batches:
            spec = {"path": paths[engine], "shape": shape, "threads": args.threads,
                    "batch": b, "prompts": prompts.tolist(), "new_tokens": args.new_tokens,
                    "repeat": args.repeat,
                    "no_extra_bufts": no_extra_bufts and engine in ("llama-q8_0", "llama-q4_0")}
            _log(f"[run] {engine} batch {b} ...")
            rows[engine][b] = _in_process_of_its_own(engine, spec)
    report(rows, batches, meta, gbs, weight_params, notes)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": shape, "bandwidth_gbs": gbs, "rows": rows, "notes": notes,
                       "reference": meta["reference"]}, f, indent=1)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
