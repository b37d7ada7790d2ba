"""The compiler driver: model in, one-file artifact out.

Every stage is reachable three ways that agree: this Python API, the
`sits-opt` tool with the same named pipeline (`Artifact.pipeline` holds the
exact string), and lit tests of the passes it runs.

    art = sits_mlir.compile("model.onnx", target="cpu", output="model.sitsm")
    model = art.load()
    y = model(x)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from .. import ir, passmanager, targets
from ..errors import CompileError, Diagnostic
from . import gpu as _gpu
from ..runtime.model import special_dtype_name
from .link import link_shared_object

__all__ = ["Artifact", "CompileOptions", "compile", "lower"]


@dataclass
class CompileOptions:
    """How to compile. Every field has a default suited to the target."""

    #: Threads the code is tiled for (0: the target's core count; 1: plain
    #: single-threaded code).
    threads: int = 0
    #: LLVM optimization level (0-3).
    opt_level: int = 3
    #: Vectorize tiled ops (off only to debug numerics).
    vectorize: bool = True
    #: Compile a model's repeated layers once (sits-outline-layers, CPU
    #: targets): compile time then follows the distinct layers, not the
    #: depth. Off only to compare.
    outline_layers: bool = True
    #: Print one line per stage with its duration to stderr.
    progress: bool = False
    #: Run sits-prune: fold weight-only subgraphs, remove identities and
    #: dead code, and prune channels and attention heads that contribute
    #: exactly nothing. Outputs do not change (beyond rounding).
    prune: bool = True
    #: Also prune channels and heads whose weights are all at most this in
    #: magnitude (None: exact pruning only). Changes outputs: opt-in.
    prune_threshold: float | None = None
    #: Weight precision of matmuls with constant weights (sits-mixed-precision):
    #: "fp32" (unchanged), "int8" (per output channel), "int4" (per group of
    #: `group_size` along K, packed), "fp8" (E4M3, targets that have it) or
    #: "auto" (per block of 64 columns, the cheapest format keeping each weight's
    #: estimated relative output error within `error_budget`). Convolutions
    #: with constant filters get INT8 per output channel with "int8", and with
    #: "auto" when that stays within `error_budget`; other formats leave them.
    #: With "int8" and "int4", embedding tables (float tables of more than
    #: 2^20 elements that a Gather reads rows of) are stored as INT8 rows with
    #: a scale per row.
    precision: str = "fp32"
    #: precision="auto": estimated relative RMS output error allowed per weight.
    error_budget: float = 0.01
    #: INT4 quantization group along K: 32, 64 or 128.
    group_size: int = 64
    #: CPU targets, INT8/INT4 weights: quantize each quantized matmul's input
    #: to INT8 when the code runs (per row and group of K: the weight's group
    #: for INT4, up to 128 for INT8 per channel) and multiply in integer dot
    #: products (VNNI, AVX2, chosen when the code runs), as llama.cpp and
    #: onnxruntime's int4 kernels do. The outputs move by the INT8 rounding of
    #: the input (about 0.4% of a group's largest magnitude per element).
    #: False keeps the input in floating point (weight-only quantization).
    int8_activations: bool = True
    #: Inputs to measure activation statistics on (a dict of input arrays, or
    #: a list of them): each quantized matmul's or convolution's per-channel
    #: input mean (bias correction) and mean square (error estimates). None:
    #: estimated from the graph.
    calibration: Any = None
    #: Scheduling goal of sits-reorder: "latency" (overlap memory- and
    #: compute-bound work where independent, within the original order's
    #: peak memory) or "memory" (lowest peak live memory).
    profile: str = "latency"
    #: Write the schedule file (.sits: fusion groups, op order with estimated
    #: times, precision per tensor and block, memory plan; read it with
    #: sits_mlir.schedule.load) to this path. It comes from the target table
    #: alone, so it is written even for targets whose code this machine
    #: cannot generate, before the error.
    emit_schedule: str | os.PathLike | None = None
    #: Explain every graph-level decision (sits_mlir.explain): True prints
    #: the report to stderr, a path writes it there as markdown.
    explain: bool | str | os.PathLike = False
    #: KV cache of a decoder exported with past/present K/V: "contiguous"
    #: keeps the exported signature; "paged" gives @main the KV allocator's
    #: paged signature (sits-page-kv-cache): the past/present K/V are
    #: replaced by `kv_pool` [num_blocks, layers, 2, kv_heads, block, head_dim]
    #: (updated in place), `block_tables` [batch, max_blocks] i32,
    #: `slot_mapping` [batch, new_tokens] i64 (-1: padding) and
    #: `context_lens` [batch] i32. CPU targets.
    kv_cache: str = "contiguous"
    #: kv_cache="paged": token positions per KV block (the allocator's).
    kv_block_size: int | None = None
    #: kv_cache="paged": element type of the KV pool. None keeps the
    #: model's K/V type; "int8" / "fp8" store each token's K and V per head
    #: as INT8 / FP8 (E4M3) codes with one f32 scale (the allocator's
    #: `per_token_head` quantization: `kv_pool` is `[..., head_dim + 4]`
    #: int8 / float8_e4m3fn), quantized as they are written: 3.8x less KV
    #: memory than f32 at a head size of 64. "int4" / "int2" store KIVI
    #: blocks (the allocator's `kivi` quantization, f32 models): keys
    #: quantized per channel over a block, values per token over groups of
    #: channels, asymmetric 4- or 2-bit codes with f16 scales, and the rows of
    #: a block not yet full kept in f32 until it fills: 80 / 48 bytes per
    #: token and K/V head of 64 at blocks of 32 (3.2x / 5.3x less than f16).
    #: "int4-token" / "int2-token" are the same blocks with keys quantized per
    #: token like values (plain per-token quantization, the baseline KIVI's
    #: per-channel keys improve on where keys have outlier channels).
    #: "auto" gives each (layer, kv head) its own KIVI width, 4 or 2 bits:
    #: the decoder is compiled with an f32 pool first, `kv_calibration`
    #: prompts are prefilled, every head's K/V blocks are quantized both
    #: ways, and heads go to 2 bits, least relative error first, while the
    #: mean over heads stays within `kv_error_budget`. The widths show in
    #: the explain report and the schedule file (`kv_cache` entries).
    kv_dtype: str | None = None
    #: kv_dtype="auto": the calibration prompts (token id sequences); None:
    #: four seeded random prompts of 256 tokens.
    kv_calibration: Any = None
    #: kv_dtype="auto": the mean relative K/V error over heads allowed
    #: (each head's larger of its K and V root-mean-square quantization error
    #: relative to their root mean square).
    kv_error_budget: float = 0.2
    #: kv_cache="paged": "last" computes the logits (every result but the
    #: pool) for each sequence's last new position only, `[B, min(S, 1), V]`,
    #: which is what serving samples from (sits-last-position): a prefill
    #: then runs the final norm and the LM head on one row per sequence.
    #: "all" keeps every position.
    logits: str = "all"
    #: A Hugging Face model folder whose tokenizer is bundled into the
    #: artifact for serving text (sits_mlir.runtime.text): tokenizer.json,
    #: the chat template and special tokens (tokenizer_config.json,
    #: chat_template.jinja) and the EOS ids (generation_config.json), as
    #: `text.*` sections. A model folder compiled as the model bundles its
    #: own unless this names another; False bundles none.
    tokenizer: str | os.PathLike | bool | None = None


@dataclass
class Artifact:
    """A compiled model written to `path` (one .sitsm file)."""

    path: str
    manifest: dict
    #: The pass pipeline that produced the code: `sits-opt --pass-pipeline=...`
    #: on the imported IR reproduces it.
    pipeline: str
    #: Seconds spent in each stage.
    timings: dict[str, float] = field(default_factory=dict)
    #: Memory at the end of each stage: {stage: {"peak_rss_mib": the
    #: process's peak resident set so far, "rss_anon_mib": its anonymous
    #: resident memory then (None off Linux)}}.
    stage_memory: dict[str, dict] = field(default_factory=dict)
    #: The graph passes' decisions, {pass: [entry, ...]} from the module's
    #: `sits.report.<pass>` attributes (see sits_mlir.explain).
    reports: dict = field(default_factory=dict)
    #: GPU targets: the kernels' PTX and cubin (compiler.gpu.DeviceCode);
    #: the artifact holds the image the host code loads.
    device_code: Any = None

    def load(self, device: str = "cpu"):
        """Loads the artifact with the runtime (see sits_mlir.runtime.load)."""
        from .. import runtime

        return runtime.load(self.path, device=device)


def _memory_mib() -> tuple[float, float | None]:
    """The process's peak resident set so far and its anonymous resident
    memory now (Linux; None elsewhere), in MiB."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_mib = peak / (1 << 20) if sys.platform == "darwin" else peak / 1024
    anon = None
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    anon = int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_mib, anon


class _Progress:
    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.timings: dict[str, float] = {}
        #: Per stage: the process's peak RSS when it ended, and its
        #: anonymous RSS then (MiB).
        self.memory: dict[str, dict[str, float | None]] = {}

    def note(self, text: str) -> None:
        if self.enabled:
            print(f"[sits]   {text}", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def stage(self, name: str, detail: str = "") -> Iterator[None]:
        if self.enabled:
            print(f"[sits] {name} {detail}".rstrip() + " ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            yield
        except MemoryError as e:
            from ..errors import CompileOutOfMemoryError

            raise CompileOutOfMemoryError(
                f"out of memory during {name} (peak RSS {_memory_mib()[0]:.0f} MiB)",
                [Diagnostic(str(e) or "allocation failed")]) from None
        elapsed = time.perf_counter() - start
        self.timings[name] = elapsed
        peak, anon = _memory_mib()
        self.memory[name] = {"peak_rss_mib": peak, "rss_anon_mib": anon}
        if self.enabled:
            print(f"[sits] {name} done in {elapsed:.2f} s (peak RSS {peak:.0f} MiB)",
                  file=sys.stderr, flush=True)


_PRECISIONS = ("fp32", "int8", "int4", "fp8", "auto")


def _graph_options(options: CompileOptions) -> str:
    """The graph passes' options (SitsGraphPipelineOptions), which the CPU
    and GPU pipelines both take."""
    threshold = options.prune_threshold
    if threshold is not None and not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"prune_threshold must be a finite number >= 0 or None, got {threshold}")
    fields = [f"prune={'true' if options.prune else 'false'}"]
    if threshold is not None:
        fields.append(f"prune-threshold={float(threshold)!r}")
    if options.precision not in _PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(_PRECISIONS)}, "
                         f"got {options.precision!r}")
    budget = float(options.error_budget)
    if not (math.isfinite(budget) and budget >= 0):
        raise ValueError(f"error_budget must be a finite number >= 0, got {options.error_budget}")
    if options.group_size not in (32, 64, 128):
        raise ValueError(f"group_size must be 32, 64 or 128, got {options.group_size}")
    fields += [f"precision={options.precision}", f"error-budget={budget!r}",
               f"group-size={int(options.group_size)}"]
    if options.profile not in ("latency", "memory"):
        raise ValueError(f"profile must be 'latency' or 'memory', got {options.profile!r}")
    fields.append(f"profile={options.profile}")
    if options.emit_schedule is not None:
        path = os.path.abspath(os.fspath(options.emit_schedule))
        if any(c.isspace() or c in "{}'\"" for c in path):
            raise ValueError(f"emit_schedule: the pass pipeline cannot carry the path {path!r} "
                             "(spaces, quotes or braces)")
        fields.append(f"schedule-file={path}")
    return " ".join(fields)


def _cpu_pipeline(options: CompileOptions, target: str = "cpu") -> str:
    # The host's peak and bandwidth are measured (once per machine, cached):
    # the target table cannot list them. The code is tuned for the machine
    # compiling it, within the target's instruction set.
    from ..targets import measure_host

    host = measure_host()
    return ("builtin.module(sits-cpu-pipeline{"
            f"target={target} num-threads={options.threads} "
            f"vectorize={'true' if options.vectorize else 'false'} "
            f"outline-layers={'true' if options.outline_layers else 'false'} "
            f"integer-dot={'true' if options.int8_activations else 'false'} "
            f"{_graph_options(options)} "
            f"peak-gflops={host.peak_fp32_gflops!r} bandwidth-gbs={host.bandwidth_gbs!r}"
            "})")


def _run_pipeline(module: ir.Module, pipeline: str) -> None:
    try:
        passmanager.PassManager.parse(pipeline).run(module.operation)
    except ir.MLIRError as error:
        raise CompileError.from_mlir_error("compilation failed", error) from None


def _native_call(name: str, *args):
    """Calls an emitter of the _sits extension, turning its diagnostics into
    a CompileError."""
    from .._mlir_libs import _sits

    ok, data, diagnostics = getattr(_sits, name)(*args)
    if not ok:
        raise CompileError(f"{name.replace('_', ' ')} failed", [
            Diagnostic(message=m, location=loc, severity=sev) for sev, loc, m in diagnostics])
    return data


_DTYPES = {"f32": "f32", "f16": "f16", "bf16": "bf16", "f64": "f64", "i64": "i64", "i32": "i32",
           "i16": "i16", "i8": "i8", "ui8": "u8", "ui16": "u16", "ui32": "u32", "ui64": "u64",
           "i1": "bool", "f8E4M3FN": "f8e4m3fn"}


def _spec(role: str, name: str, type_: ir.Type, source=None) -> dict:
    shaped = ir.RankedTensorType(type_)
    element = str(shaped.element_type)
    if source is not None and np.dtype(source.dtype).kind == "u" and element.startswith("i"):
        element = "u" + element  # the model's unsigned integer, signless in MLIR
    bytes_of = special_dtype_name(source.dtype) if source is not None else None
    if bytes_of is not None and element == "i8":
        element = bytes_of  # fp8, int4, ...: passed as their bytes
    if element not in _DTYPES and element != bytes_of:
        raise CompileError(f"{role} '{name}' has element type {element}, which the runtime "
                           "cannot pass at the model boundary")
    shape = [-1 if shaped.is_dynamic_dim(i) else shaped.get_dim_size(i)
             for i in range(shaped.rank)]
    spec = {"role": role, "name": name, "dtype": _DTYPES.get(element, element), "shape": shape}
    # Symbolic names tie dynamic extents together: an output extent named
    # like an input's is sized from that input.
    names = [n if source is not None and k < len(source.dim_names) and shape[k] < 0 else None
             for k, n in enumerate(getattr(source, "dim_names", ()) or [None] * len(shape))]
    if any(names):
        spec["dim_names"] = names
    return spec


def _find_main(module: ir.Module):
    for op in module.body.operations:
        if op.operation.name == "func.func" and \
                ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise CompileError("the model has no public function @main")


_SHAPES = "main_shapes"


def _resolved_by_runtime(name, known: set) -> bool:
    """Whether the runtime sizes an output extent named `name`: an input
    extent's name, or arithmetic of them (`past + seq`: integers, names,
    + - * //, parentheses), which it evaluates (module.cpp's
    ExtentExpression reads this ASCII subset of `extent_tree`'s syntax)."""
    from ..frontend.onnx._graph import extent_names, extent_tree

    if not name:
        return False
    if name in known:
        return True
    if not re.fullmatch(r"[A-Za-z0-9_ +\-*/()]+", name):
        return False
    tree = extent_tree(name)
    return tree is not None and tree[0] != "dim" and set(extent_names(tree)) <= known


def _needs_shape_function(signature: dict) -> bool:
    """Whether some dynamic output extent is neither an input extent's name
    nor arithmetic of them, so that only running the model tells it."""
    args = signature["args"]
    known = {n for a in args if a["role"] == "input" for n in a.get("dim_names", ()) if n}
    for a in args:
        if a["role"] != "output":
            continue
        names = a.get("dim_names") or [None] * len(a["shape"])
        if any(d < 0 and not _resolved_by_runtime(names[k], known)
               for k, d in enumerate(a["shape"])):
            return True
    return False


def _add_shape_function(module: ir.Module, signature: dict) -> dict:
    """Adds @main_shapes: @main returning its outputs' dynamic extents (one
    i64 each, in output order) instead of the outputs, and returns its
    signature. The runtime calls it to size outputs whose extents neither
    an input extent nor arithmetic of them names (`_needs_shape_function`).

    It is a copy of @main returning the extents: canonicalization folds
    them to arithmetic on the input extents wherever the graph allows, and
    DCE removes the rest of the model, but only late in the pipeline, after
    the graph passes have seen the copy too."""
    from ..dialects import arith, func, tensor

    main = _find_main(module)
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    # Results that update an argument in place are not outputs.
    outputs = [i for i, attrs in enumerate(_func_attrs(main, "res_attrs", len(ftype.results)))
               if "sits.updates" not in attrs]
    with module.context, ir.Location.name("main_shapes"), \
            ir.InsertionPoint(module.body):
        clone = main.operation.clone()
        clone.attributes["sym_name"] = ir.StringAttr.get(_SHAPES)
        if "res_attrs" in clone.attributes:
            del clone.attributes["res_attrs"]
        block = clone.regions[0].blocks[0]
        ret = list(block.operations)[-1]
        i64 = ir.IntegerType.get_signless(64)
        with ir.InsertionPoint(ret):
            extents = []
            for v in (ret.operands[i] for i in outputs):
                t = ir.RankedTensorType(v.type)
                for d in range(t.rank):
                    if t.is_dynamic_dim(d):
                        index = tensor.dim(v, arith.constant(ir.IndexType.get(), d))
                        extents.append(arith.index_cast(i64, index))
            shapes_type = ir.RankedTensorType.get([len(extents)], i64)
            func.ReturnOp([tensor.from_elements(shapes_type, extents)])
        ret.erase()
        clone.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(ftype.inputs, [shapes_type]))
    inputs = [a for a in signature["args"] if a["role"] == "input"]
    return {"name": _SHAPES,
            "args": inputs + [{"role": "output", "name": "shapes", "dtype": "i64",
                               "shape": [shapes_type.shape[0]]}]}


def _func_attrs(func, key: str, count: int) -> list[dict]:
    """The `arg_attrs`/`res_attrs` of a func.func as dicts of attributes."""
    if key not in func.attributes:
        return [{} for _ in range(count)]
    dicts = [ir.DictAttr(d) for d in ir.ArrayAttr(func.attributes[key])]
    return [{d[j].name: d[j].attr for j in range(len(d))} for d in dicts]


def _entry_signature(module: ir.Module, inputs=None, outputs=None) -> dict:
    """Inputs and outputs of @main, read before lowering rewrites them.
    `inputs`/`outputs` are the frontend's TensorSpecs when there are any:
    they name the arguments and say which (signless) integers are unsigned.
    A `sits.name` argument attribute names an argument the compiler added;
    a result marked `sits.updates = i` is argument i updated in place, which
    the code does not return."""
    main = _find_main(module)
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    inputs = inputs or [None] * len(ftype.inputs)
    outputs = outputs or [None] * len(ftype.results)
    arg_attrs = _func_attrs(main, "arg_attrs", len(ftype.inputs))
    res_attrs = _func_attrs(main, "res_attrs", len(ftype.results))
    updated = {ir.IntegerAttr(a["sits.updates"]).value for a in res_attrs if "sits.updates" in a}
    args = []
    for i, (s, t, attrs) in enumerate(zip(inputs, ftype.inputs, arg_attrs)):
        name = ir.StringAttr(attrs["sits.name"]).value if "sits.name" in attrs else \
            s.name if s else f"input_{i}"
        args.append(_spec("input", name, t, s))
        if i in updated:
            args[-1]["updated_in_place"] = True
        if "sits.kv_quantization" in attrs:
            # A KV pool of INT8 rows (codes, then their f32 scale): the
            # allocator's PoolConfig(dtype="int8", quantization=...).
            args[-1]["kv_quantization"] = ir.StringAttr(attrs["sits.kv_quantization"]).value
        if "sits.kivi" in attrs:
            # KIVI blocks: the geometry their [blocks, bytes] type hides.
            mode, layers, heads, block, dim, *widths = ir.DenseI64ArrayAttr(attrs["sits.kivi"])
            kivi = args[-1]["kivi"] = {"bits": mode % KEYS_PER_TOKEN, "layers": layers,
                                       "kv_heads": heads, "block_size": block,
                                       "head_dim": dim,
                                       "keys": "token" if mode & KEYS_PER_TOKEN else "channel"}
            if mode == MIXED_WIDTHS:  # a width per (layer, kv head); 4 the widest
                kivi.update(bits=4, widths=list(widths))
    status = [i for i, a in enumerate(res_attrs) if "sits.status" in a]
    returned = [i for i, a in enumerate(res_attrs) if "sits.updates" not in a]
    if status and (len(status) > 1 or status[0] != returned[-1]):
        raise CompileError("internal error: the status result of @main must be its last "
                           "returned result")
    outputs = list(outputs) + [None] * (len(ftype.results) - len(outputs))
    args += [_spec("output", s.name if s else f"output_{i}", t, s)
             for i, (s, t, attrs) in enumerate(zip(outputs, ftype.results, res_attrs))
             if "sits.updates" not in attrs and "sits.status" not in attrs]
    if status:
        # The code's index checks (check_indices): the runtime passes a
        # zeroed i32 and turns a non-zero value k into InputOutOfRangeError
        # with message k.
        messages = [ir.StringAttr(m).value
                    for m in ir.ArrayAttr(res_attrs[status[0]]["sits.status"])]
        args.append({"role": "status", "name": "status", "dtype": "i32", "shape": [],
                     "messages": messages})
    return {"name": "main", "args": args}


#: The KV pool element types `CompileOptions.kv_dtype` takes (None: the
#: model's own).
KV_DTYPES = (None, "int8", "fp8", "int4", "int2", "int4-token", "int2-token", "auto")

#: Added to a KIVI layout's bits when keys are quantized per token
#: (sits/runtime/kivi_layout.h's kKeysPerToken).
KEYS_PER_TOKEN = 256
#: A KIVI layout's mode with a width per (layer, kv head) (kMixedWidths).
MIXED_WIDTHS = 512

#: The KV block size a paged decoder gets when none is asked for: KIVI
#: blocks group 32 tokens per key channel (their parameters cost 4 bytes per
#: channel and block), the others 16.
def default_kv_block_size(kv_dtype: str | None) -> int:
    return 32 if kv_dtype in ("int4", "int2", "int4-token", "int2-token", "auto") else 16


def _page_kv_cache(module: ir.Module, inputs, outputs, block_size: int,
                   kv_dtype: str | None = None):
    """Runs sits-page-kv-cache on `module`; returns the frontend specs of
    the arguments and results that remain (None for the ones it added)."""
    main = _find_main(module)
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    inputs = list(inputs or [None] * len(ftype.inputs))
    # (No spec for results the frontend adds, such as the status.)
    outputs = list(outputs or []) + [None] * (len(ftype.results) - len(outputs or []))
    # Tag every argument and result with its position, so that the ones the
    # pass keeps find their specs again.
    with module.context:
        def tag(attrs, i):
            return ir.DictAttr.get({**attrs, "driver.original_index": ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), i)})

        for key, count in (("arg_attrs", len(inputs)), ("res_attrs", len(outputs))):
            main.attributes[key] = ir.ArrayAttr.get(
                [tag(a, i) for i, a in enumerate(_func_attrs(main, key, count))])
    if isinstance(kv_dtype, tuple):  # ("mixed", widths): kv_dtype="auto"'s choice
        dtype = f" kv-dtype=mixed kv-widths={','.join(map(str, kv_dtype[1]))}"
    else:
        dtype = f" kv-dtype={kv_dtype}" if kv_dtype else ""
    _run_pipeline(module, f"builtin.module(sits-page-kv-cache{{block-size={block_size}{dtype}}})")
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)

    def remaining(key, specs, count):
        kept = []
        for attrs in _func_attrs(main, key, count):
            original = attrs.pop("driver.original_index", None)
            kept.append(specs[ir.IntegerAttr(original).value] if original is not None else None)
        return kept

    new_inputs = remaining("arg_attrs", inputs, len(ftype.inputs))
    new_outputs = remaining("res_attrs", outputs, len(ftype.results))
    with module.context:
        for key, count in (("arg_attrs", len(ftype.inputs)), ("res_attrs", len(ftype.results))):
            cleaned = [ir.DictAttr.get({k: v for k, v in attrs.items() if k != "driver.original_index"})
                       for attrs in _func_attrs(main, key, count)]
            main.attributes[key] = ir.ArrayAttr.get(cleaned)
    return new_inputs, new_outputs


def _last_position(module: ir.Module, outputs):
    """Runs sits-last-position on `module`; returns the output specs with
    the position extent of each sliced result named `min(S, 1)` in the
    terms of its former name, so that the shape function stays arithmetic."""
    _run_pipeline(module, "builtin.module(sits-last-position{axis=1})")
    main = _find_main(module)
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    specs = []
    for spec, type_ in zip(outputs, ftype.results):
        names = list(spec.dim_names) if spec is not None else []
        shaped = ir.RankedTensorType(type_)
        if len(names) > 1 and names[1] and shaped.rank > 1 and shaped.is_dynamic_dim(1):
            # min(S, 1) for S >= 0, in the extent grammar (+ - * //).
            names[1] = f"1 - 1 // ({names[1]} + 1)"
            spec = dataclasses.replace(spec, dim_names=tuple(names))
        specs.append(spec)
    return specs


def lower(module: ir.Module, target: str = "cpu", options: CompileOptions | None = None) -> str:
    """Runs the target's pipeline on `module` in place (SITS/linalg on
    tensors to the LLVM dialect) and returns the pipeline string."""
    options = options or CompileOptions()
    t = targets.lookup(target)
    if t.is_gpu:
        _gpu.check_supported(t)
    from ..dialects import sits

    with module.context:
        module.operation.attributes["sits.target"] = sits.TargetAttr.get(t.name)
    pipeline = _pipeline(t, options)
    _run_pipeline(module, pipeline)
    return pipeline


def _pipeline(t, options: CompileOptions) -> str:
    if t.is_gpu:
        return _gpu.pipeline(t, options.opt_level, _graph_options(options))
    return _cpu_pipeline(options, t.name)


def compile(model: Any, target: str = "cpu", output: str | os.PathLike | None = None, *,
            options: CompileOptions | None = None, **option_fields) -> Artifact:
    """Compiles `model` for `target` into one .sitsm artifact file.

    `model` is an ONNX file path, its bytes or an `onnx.ModelProto`, an
    `.mlir` file path, an `ir.Module` (SITS/linalg IR with a public
    `@main`, compiled in place), or a Hugging Face model folder, whose
    causal LM is exported with its KV cache first (sits_mlir.compiler.hf;
    torch and transformers) and whose tokenizer is bundled. `output`
    defaults to the model's path with the `.sitsm` suffix (the folder's
    path with `.sitsm` appended), or a temporary file. Options are a CompileOptions
    or its fields as keywords (`threads=4`, `progress=True`, ...).

    Raises CompileError listing every problem found (all unsupported ONNX
    nodes at once, or the MLIR diagnostics of a failed pass, with the ONNX
    node names as locations).
    """
    options = options or CompileOptions()
    for key, value in option_fields.items():
        if not hasattr(options, key):
            raise TypeError(f"compile() got an unexpected keyword argument '{key}'")
        setattr(options, key, value)
    progress = _Progress(options.progress)
    t = targets.lookup(target)
    # Checked before anything is read: a bad option should not cost an import.
    if options.kv_dtype not in KV_DTYPES:
        raise ValueError(f"kv_dtype must be one of {', '.join(map(repr, KV_DTYPES))}, "
                         f"got {options.kv_dtype!r}")
    if options.kv_dtype is not None and options.kv_cache != "paged":
        raise ValueError("kv_dtype needs kv_cache='paged' (a contiguous decoder keeps "
                         "the K/V type of its exported signature)")
    from . import hf

    folder = os.fspath(model) if hf.is_model_folder(model) else None
    if folder is not None and output is None:  # next to the folder, not the exported ONNX
        output = os.path.abspath(folder) + ".sitsm"
    # Read (and checked) before the compile: a bad tokenizer should not cost one.
    text_sections = _text_sections(options.tokenizer, folder)
    unsupported = None
    if t.is_gpu:
        try:
            _gpu.check_supported(t)
        except CompileError as error:
            # The schedule and the explain report need the target table only:
            # they are still produced, and the error raised after them.
            if options.emit_schedule is None and not options.explain:
                raise
            unsupported = error

    with contextlib.ExitStack() as stack:
        if not isinstance(model, ir.Module):
            stack.enter_context(ir.Context())
        if folder is not None:
            exported = stack.enter_context(tempfile.TemporaryDirectory(prefix="sits-hf-"))
            with progress.stage("export", f"({folder})"):
                model = os.path.join(exported, "model.onnx")
                hf.export_folder(folder, model)
        with progress.stage("import"):
            module, input_specs, output_specs, keep_alive, source = _import(
                model, quantize_tables=options.precision in ("int8", "int4"))
        shared = getattr(keep_alive, "shared_layers", None)
        if shared:
            progress.note(f"{shared[0]} repeated layers of {shared[1]} nodes imported as one")
        if options.kv_cache not in ("contiguous", "paged"):
            raise ValueError(f"kv_cache must be 'contiguous' or 'paged', got {options.kv_cache!r}")
        if options.logits not in ("all", "last"):
            raise ValueError(f"logits must be 'all' or 'last', got {options.logits!r}")
        if options.logits == "last" and options.kv_cache != "paged":
            raise ValueError("logits='last' needs kv_cache='paged' (the other results of a "
                             "contiguous decoder are its present K/V)")
        if options.kv_cache == "paged":
            if t.is_gpu and options.kv_dtype is not None:
                # Quantized pools are read and written by the CPU runtime's
                # kernels; a GPU pool holds the model's own K/V type.
                raise CompileError(f"kv_dtype={options.kv_dtype!r} is compiled for CPU "
                                   f"targets only; a paged KV cache for {t.name} holds "
                                   "the model's K/V type (leave kv_dtype unset)")
            block_size = options.kv_block_size
            if block_size is None:
                block_size = default_kv_block_size(options.kv_dtype)
            if not isinstance(block_size, int) or block_size <= 0:
                raise ValueError("kv_block_size must be a positive integer, "
                                 f"got {block_size!r}")
            kv_dtype, kv_report = options.kv_dtype, None
            if kv_dtype == "auto":
                with progress.stage("calibrate KV"):
                    widths, kv_report = _choose_kv_widths(model, options, block_size)
                kv_dtype = ("mixed", widths)
            with progress.stage("page KV cache"):
                input_specs, output_specs = _page_kv_cache(
                    module, input_specs, output_specs, block_size, kv_dtype)
                if kv_report is not None:
                    _set_report(module, "kv_cache", kv_report)
                if options.logits == "last":
                    output_specs = _last_position(module, output_specs)
        signature = _entry_signature(module, input_specs, output_specs)
        # Outputs sized by the data need a shape function on the CPU; GPU
        # artifacts take preallocated outputs for them. Extents that are
        # arithmetic of input extents (`past + seq`) need neither: the
        # runtime evaluates their names.
        shapes = _add_shape_function(module, signature) \
            if not t.is_gpu and _needs_shape_function(signature) else None
        if options.calibration is not None and options.precision != "fp32":
            from .calibration import attach_input_stats, calibration_samples

            with progress.stage("calibrate"):
                attach_input_stats(module, calibration_samples(options.calibration),
                                   options.threads,
                                   [s.name for s in input_specs] if input_specs else None)
        if unsupported is not None:
            graph = f"builtin.module(sits-graph-pipeline{{{_graph_options(options)}}})"
            with progress.stage("schedule", f"({graph})"):
                from ..dialects import sits

                with module.context:
                    module.operation.attributes["sits.target"] = sits.TargetAttr.get(t.name)
                _run_pipeline(module, graph)
            _explain(module, options, t.name)
            raise unsupported
        # Placed only from a context of our own: the blobs in the file are
        # overwritten past the weights once the artifact is written.
        placed_file = None if t.is_gpu or isinstance(model, ir.Module) else \
            _weight_file(module, output, source, stack)
        with progress.stage("lower", f"({_pipeline(t, options)})"):
            pipeline = lower(module, t.name, options)
        from .. import explain

        reports = explain.reports(module)
        device = None
        if t.is_gpu:
            # Device code first: the host code embeds the assembled image.
            kind = "LLVM IR" if t.vendor == "amd" else "PTX"
            with progress.stage("assemble", f"({kind} for {t.chip})"):
                device = _gpu.assemble(module, t, options.opt_level)
        with progress.stage("codegen"):
            # Views of the weights where they lie (the importer's buffers and
            # the context's blobs), streamed into the artifact below: never
            # one more copy of them in memory.
            weights = _native_call("weight_views", module.operation)
            weights_size = sum(len(v) for v in weights)
            # The leading bytes lowering already wrote to their place in the
            # artifact's file.
            attrs = module.operation.attributes
            placed = (ir.IntegerAttr(attrs["sits.weights_placed"]).value
                      if placed_file is not None and "sits.weights_placed" in attrs else 0)
            # GPU host code runs on this machine's CPU family, without
            # assuming any CPU feature.
            cpu = targets.lookup("cpu") if t.is_gpu else t
            # LLVM optimizes and emits parts of the module on every core.
            objects = _native_call("emit_objects", module.operation, cpu.triple,
                                   _gpu.generic_cpu(cpu.triple) if t.is_gpu else t.chip,
                                   "" if t.is_gpu else t.features, options.opt_level, 0)
        with progress.stage("link"):
            shared_object = link_shared_object(objects, cpu.triple)
        del objects

        entry_points = [signature] + ([shapes] if shapes else [])
        if shapes:
            signature["shape_function"] = shapes["name"]
        for entry in entry_points:  # every entry point takes the weights
            if weights_size:
                entry["args"].insert(0, {"role": "weights", "name": "weights", "dtype": "i8",
                                         "shape": [weights_size]})
        manifest = {
            "target": {"name": t.name, "triple": t.triple, "cpu": t.chip,
                       "features": [f for f in t.features.split(",") if f.startswith("+")]},
            "entry_points": entry_points,
            "pipeline": pipeline,
        }
        if device is not None:
            host = targets.lookup("cpu")
            manifest["target"] = {"name": t.name, "triple": host.triple,
                                  "cpu": _gpu.generic_cpu(host.triple), "features": []}
            manifest["device"] = _gpu.manifest_entry(t, device)
        path = os.fspath(output) if output is not None else _default_output(source)
        with progress.stage("write", path):
            from .. import runtime

            # The header's section table (manifest, code, weights and the
            # text sections) must fit before the placed weights; else they
            # are copied like the rest.
            if 64 * (4 + len(text_sections or {})) > getattr(placed_file, "weights_offset", 0):
                placed = 0
            rest = _skip_bytes(weights, placed)
            runtime.write_artifact(path, manifest=manifest, code=shared_object,
                                   weights=iter(rest) if rest else None,
                                   weights_size=(weights_size - placed) or None,
                                   target=t.name, sections=text_sections or None,
                                   placed=(placed_file, placed) if placed else None)
            # The writer digested the weights as it streamed them: reading
            # back checks the rest (re-hashing would map every weight page).
            manifest = runtime.read_artifact(path, verify="metadata").manifest
        # The views go before the buffers they view.
        del weights
        del keep_alive
    _explain(module, options, t.name, reports, progress)
    artifact = Artifact(path, manifest, pipeline, progress.timings, progress.memory,
                        reports=reports)
    artifact.device_code = device
    return artifact


def _kivi_error(x, bits: int, block: int, keys: bool) -> tuple[float, float]:
    """(squared error, squared norm) of KIVI-quantizing x [blocks, block,
    head_dim] in float64: keys per channel over a block's tokens, values
    per token over groups of min(block, head_dim) channels (the largest
    divisor of head_dim not above it), asymmetric min-max codes."""
    import numpy as np

    x = np.asarray(x, np.float64)
    if not keys:
        dim = x.shape[-1]
        group = min(block, dim)
        while dim % group:
            group -= 1
        x = x.reshape(x.shape[0], block, dim // group, group).transpose(0, 2, 3, 1)
    else:
        x = x.transpose(0, 2, 1)  # [blocks, channel, token]: per channel
    lo, hi = x.min(-1, keepdims=True), x.max(-1, keepdims=True)
    step = (hi - lo) / (2 ** bits - 1)
    step = np.where(step > 0, step, 1.0)
    q = np.clip(np.floor((x - lo) / step + 0.5), 0, 2 ** bits - 1) * step + lo
    return float(((q - x) ** 2).sum()), float((x ** 2).sum())


def _choose_kv_widths(model, options: CompileOptions, block_size: int):
    """kv_dtype="auto": a width, 4 or 2 bits, per (layer, kv head) and the
    report entries of the choice (see CompileOptions.kv_dtype)."""
    import numpy as np

    if not isinstance(model, (str, os.PathLike)):
        raise ValueError("kv_dtype='auto' compiles the model twice: pass it as a file")
    budget = options.kv_error_budget
    if not isinstance(budget, (int, float)) or not 0 <= budget:
        raise ValueError(f"kv_error_budget must be a number >= 0, got {budget!r}")
    prompts = options.kv_calibration
    if prompts is not None:
        prompts = [[int(t) for t in np.asarray(p).reshape(-1)] for p in prompts]
    if prompts is not None and (not prompts or any(len(p) < block_size for p in prompts)):
        raise ValueError(f"kv_calibration must be prompts of at least kv_block_size = "
                         f"{block_size} tokens (the K/V of full blocks are measured)")
    from ..runtime import kv
    from ..tools.runtime import decoder_geometry

    with tempfile.TemporaryDirectory(prefix="sits-kv-auto-") as tmp:
        f32 = compile(model, "cpu", os.path.join(tmp, "f32.sitsm"), kv_cache="paged",
                      kv_block_size=block_size, threads=options.threads, progress=False,
                      logits="last").load()
        g = decoder_geometry(f32)
        layers, heads = g["layers"], g["kv_heads"]
        vocab = g["vocab"]
        if prompts is None:
            prompts = np.random.default_rng(0).integers(0, vocab, (4, 256)).tolist()
        if any(t < 0 or t >= vocab for p in prompts for t in p):
            raise ValueError(f"kv_calibration token ids must be in [0, {vocab})")
        longest = max(len(p) for p in prompts)
        blocks = -(-longest // block_size)
        # [layer, head, kind] -> (squared error at 2, at 4 bits, squared norm)
        sums = np.zeros((layers, heads, 2, 3))
        names = {s.name for s in f32.default_entry.inputs}
        for p in prompts:
            alloc = kv.KVAllocator(num_blocks=blocks + 2, block_size=block_size,
                                   num_layers=layers, num_kv_heads=heads,
                                   head_dim=g["head_dim"], dtype="f32",
                                   max_seq_len=blocks * block_size,
                                   enable_prefix_caching=False)
            memory = kv.KVMemory(alloc)
            alloc.add_sequence(0, num_tokens=len(p))
            feeds = {"input_ids": np.asarray([p], np.int64),
                     "position_ids": np.arange(len(p), dtype=np.int64)[None],
                     "kv_pool": memory.device,
                     "block_tables": alloc.block_table(0)[None].astype(np.int32),
                     "slot_mapping": alloc.slot_mapping(0, 0, len(p))[None].astype(np.int64),
                     "context_lens": np.array([len(p)], np.int32)}
            f32.run(**{k: v for k, v in feeds.items() if k in names})
            full = alloc.block_table(0)[:len(p) // block_size]
            pool = memory.device[full]  # [blocks, layers, 2, heads, block, dim]
            for layer in range(layers):
                for h in range(heads):
                    for kind in (0, 1):
                        x = pool[:, layer, kind, h]
                        e2, norm = _kivi_error(x, 2, block_size, kind == 0)
                        e4, _ = _kivi_error(x, 4, block_size, kind == 0)
                        sums[layer, h, kind] += (e2, e4, norm)
            memory.close()
        del f32
    # Per head: the larger of its K and V relative errors at each width.
    rel = np.sqrt(sums[..., :2] / np.maximum(sums[..., 2:3], 1e-30)).max(axis=2)
    err2, err4 = rel[..., 0].reshape(-1), rel[..., 1].reshape(-1)
    widths = [4] * (layers * heads)
    total = float(err4.sum())
    for i in np.argsort(err2 - err4, kind="stable"):
        if (total + err2[i] - err4[i]) / len(widths) > budget:
            break
        widths[i] = 2
        total += err2[i] - err4[i]
    report = [{"op": f"layer {i // heads}", "kind": "kv_width", "kv_head": i % heads,
               "bits": widths[i], "error_4bit": float(err4[i]),
               "error_2bit": float(err2[i])} for i in range(len(widths))]
    report.append({"op": "kv_pool", "kind": "kv_widths", "mean_error": total / len(widths),
                   "budget": float(budget), "two_bit_heads": widths.count(2),
                   "heads": len(widths)})
    return widths, report


def _set_report(module: ir.Module, name: str, entries: list) -> None:
    """Records `entries` as the module's `sits.report.<name>` (as the graph
    passes record theirs: the explain report and the schedule file show
    it)."""
    def attr(value):
        if isinstance(value, bool):
            return ir.BoolAttr.get(value)
        if isinstance(value, int):
            return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
        if isinstance(value, float):
            return ir.FloatAttr.get_f64(value)
        return ir.StringAttr.get(str(value))

    with module.context:
        module.operation.attributes[f"sits.report.{name}"] = ir.ArrayAttr.get(
            [ir.DictAttr.get({k: attr(v) for k, v in e.items()}) for e in entries])


def _explain(module: ir.Module, options: CompileOptions, target: str,
             reports: dict | None = None, progress: _Progress | None = None) -> dict:
    """The module's graph-pass reports (read from it unless given), rendered
    with the compile's stages to stderr or a markdown file when
    options.explain asks for it."""
    from .. import explain

    if reports is None:
        reports = explain.reports(module)
    if options.explain:
        stages = None
        if progress is not None:
            stages = {name: {"seconds": seconds, **progress.memory.get(name, {})}
                      for name, seconds in progress.timings.items()}
        text = explain.render(reports, title=f"SITS explain report: {target}", stages=stages)
        if options.explain is True:
            print(text, file=sys.stderr, flush=True)
        else:
            with open(options.explain, "w", encoding="utf-8") as f:
                f.write(text)
    return reports


def _text_sections(tokenizer, folder: str | None) -> dict:
    """The tokenizer sections to bundle (sits_mlir.runtime.text): of the
    `tokenizer` folder, else of the model folder, or none."""
    if tokenizer is False or (tokenizer is None and folder is None):
        return {}
    if tokenizer is True and folder is None:
        raise ValueError("tokenizer=True bundles the model folder's tokenizer: the model is "
                         "not a folder, name the tokenizer's folder instead")
    where = os.fspath(folder if tokenizer in (None, True) else tokenizer)
    from ..runtime.text import tokenizer_sections

    try:
        return tokenizer_sections(where)
    except ImportError as e:  # the 'tokenizers' package
        raise CompileError(f"bundling the tokenizer of {where}: {e}") from None
    except ValueError as e:
        hint = (" (tokenizer=False compiles the model without it)"
                if tokenizer is None else "")
        raise CompileError(f"cannot bundle the tokenizer: {e}{hint}") from None


def _weight_file(module: ir.Module, output, source: str | None,
                 stack: contextlib.ExitStack):
    """The new artifact file that lowering `module` writes its packed
    weights into, at their place (sits_mlir.runtime.placed_weights_file), in
    the directory the artifact goes to; None where none can be made (the
    weights are then written when the artifact is). Undone by `stack`."""
    from .._mlir_libs import _sits
    from .. import runtime
    from ..errors import SitsError

    if output is not None:
        directory = os.path.dirname(os.path.abspath(os.fspath(output)))
    elif source and not source.endswith(".sitsm"):
        directory = os.path.dirname(os.path.abspath(source))
    else:
        directory = tempfile.gettempdir()
    try:
        file = runtime.placed_weights_file(directory)
    except (OSError, SitsError):
        return None  # an unwritable directory fails when the artifact is written
    stack.callback(file.close)
    _sits.set_weight_file(module.operation, file.fd, file.weights_offset)
    stack.callback(_sits.set_weight_file, module.operation, -1)
    return file


def _skip_bytes(views: list, count: int) -> list:
    """`views` less their first `count` bytes, which end on a view's end."""
    for i, view in enumerate(views):
        if count == 0:
            return views[i:]
        count -= len(view)
        if count < 0:
            raise CompileError("the placed weights end inside a weight")
    return []


def _default_output(source: str | None) -> str:
    if source and not source.endswith(".sitsm"):
        return os.path.splitext(source)[0] + ".sitsm"
    fd, path = tempfile.mkstemp(suffix=".sitsm", prefix="sits-")
    os.close(fd)
    return path


def _import(model: Any, *, quantize_tables: bool = False):
    """(module, input specs, output specs, objects to keep alive, source).
    `quantize_tables`: embedding tables as INT8 rows (see import_model)."""
    if isinstance(model, ir.Module):
        return model, None, None, None, None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise CompileError(f"model file not found: {path}")
        if path.endswith(".mlir"):
            with open(path) as f:
                text = f.read()
            try:
                return ir.Module.parse(text), None, None, None, path
            except ir.MLIRError as error:
                raise CompileError.from_mlir_error(f"cannot parse {path}", error) from None
    from ..frontend.onnx import import_model

    imported = import_model(model, context=ir.Context.current, quantize_tables=quantize_tables)
    source = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
    return imported.module, imported.inputs, imported.outputs, imported, source
