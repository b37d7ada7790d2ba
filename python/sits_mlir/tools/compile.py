"""sits-compile: compile a model into a SITS artifact (.sitsm).

    sits-compile model.onnx --target cpu -o model.sitsm [--threads N]
    sits-compile model.onnx --target v100 --profile latency --emit-schedule model.sits
                 [--explain[=report.md]]
    sits-compile path/to/hf-model --target cpu --kv-cache paged -o model.sitsm
    sits-compile decoder.onnx --kv-cache paged --tokenizer path/to/hf-model -o model.sitsm

Accepts ONNX models, .mlir files (SITS/linalg IR with a public @main) and
Hugging Face model folders (the causal LM exported with its KV cache through
torch and transformers, `pip install 'sits-mlir[hf]'`; its tokenizer, chat
template and EOS ids bundled for serving text, as --tokenizer bundles them
with any model).
Prints the artifact's signature and the time of each stage; errors go to
stderr with every problem found (all unsupported ONNX nodes at once), and
the exit status is 1.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Sequence

__all__ = ["main"]


def _threshold(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    from .. import targets

    p = argparse.ArgumentParser(prog="sits-compile",
                                description="Compile a model into a SITS artifact (.sitsm).")
    p.add_argument("model", help="an ONNX model, an .mlir file or a Hugging Face model folder")
    p.add_argument("--target", default="cpu",
                   help=f"target name or alias ({', '.join(targets.names())}; default: cpu)")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="the artifact to write (default: the model's name with .sitsm)")
    p.add_argument("--threads", type=int, default=0, metavar="N",
                   help="threads to tile for (default: 0, the target's core count)")
    p.add_argument("--opt-level", type=int, default=3, choices=range(4), metavar="{0-3}",
                   help="LLVM optimization level (default: 3)")
    p.add_argument("--profile", choices=("latency", "memory"), default="latency",
                   help="scheduling goal: 'latency' overlaps memory- and compute-bound work "
                        "within the original peak memory, 'memory' minimizes peak live memory "
                        "(default: latency)")
    p.add_argument("--emit-schedule", metavar="PATH",
                   help="write the schedule (fusion groups, op order with estimated times, "
                        "precision per tensor and block, memory plan) to PATH; written before "
                        "code generation, so also for targets this machine cannot generate "
                        "code for")
    p.add_argument("--explain", nargs="?", const=True, default=False, metavar="PATH",
                   help="explain every graph-level decision: to stderr, or as markdown to PATH "
                        "(--explain=PATH)")
    p.add_argument("--no-prune", dest="prune", action="store_false",
                   help="do not run sits-prune (folding, identity and dead code removal, "
                        "exact pruning of channels and heads contributing nothing)")
    p.add_argument("--prune-threshold", type=_threshold, metavar="T",
                   help="also prune channels and heads whose weights are all at most T in "
                        "magnitude (changes outputs; default: exact pruning only)")
    p.add_argument("--precision", choices=("fp32", "int8", "int4", "fp8", "auto"),
                   default="fp32",
                   help="weight precision of matmuls with constant weights: int8 (per output "
                        "channel), int4 (per group along K, packed), fp8 (E4M3, targets with "
                        "FP8), auto (per block of 64 columns, within --error-budget); constant "
                        "conv filters get int8 with int8 and auto (default: fp32)")
    p.add_argument("--error-budget", type=_threshold, default=0.01, metavar="E",
                   help="--precision auto: estimated relative output error allowed per weight "
                        "(default: 0.01)")
    p.add_argument("--group-size", type=int, choices=(32, 64, 128), default=64,
                   help="INT4 quantization group along K (default: 64)")
    p.add_argument("--kv-cache", choices=("contiguous", "paged"), default="contiguous",
                   help="a decoder exported with past/present K/V: keep that signature, or "
                        "read and write K/V in the KV allocator's paged pool (CPU targets)")
    p.add_argument("--kv-block-size", type=int, default=None, metavar="N",
                   help="--kv-cache paged: token positions per KV block (default: 32 with "
                        "--kv-dtype int4/int2, else 16)")
    p.add_argument("--kv-dtype", choices=("int8", "fp8", "int4", "int2", "int4-token",
                                          "int2-token", "auto"), default=None,
                   help="--kv-cache paged: store K/V as INT8 or FP8 (E4M3) codes with an "
                        "f32 scale per token and head (3.8x less KV memory than f32), or as "
                        "4-/2-bit KIVI blocks (keys per channel, values per token; 6.4x / "
                        "10.7x less; f32 models; -token: keys per token too), or auto: a "
                        "KIVI width per layer and K/V head from calibration prompts, within "
                        "--kv-error-budget (default: the model's K/V type)")
    p.add_argument("--kv-error-budget", type=_threshold, default=0.2, metavar="E",
                   help="--kv-dtype auto: the mean relative K/V error over heads allowed "
                        "(default: 0.2)")
    p.add_argument("--logits", choices=("all", "last"), default="all",
                   help="--kv-cache paged: logits of every new position, or of each "
                        "sequence's last one only (what serving samples from; a prefill "
                        "then skips the LM head for the other positions)")
    text = p.add_mutually_exclusive_group()
    text.add_argument("--tokenizer", metavar="DIR",
                      help="bundle the tokenizer of this Hugging Face model folder "
                           "(tokenizer.json, the chat template and special tokens, the EOS ids "
                           "of generation_config.json) for serving text (default: the model's "
                           "own when the model is a folder)")
    text.add_argument("--no-tokenizer", dest="tokenizer", action="store_false",
                      help="a model folder: do not bundle its tokenizer")
    p.set_defaults(tokenizer=None)
    p.add_argument("--sign", metavar="KEY",
                   help="sign the artifact with this Ed25519 private key (PEM); writes "
                        "<output>.sig next to it (sits_mlir.runtime.signing)")
    p.add_argument("--check", action="store_true",
                   help="only run the pre-flight check and list unsupported nodes")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from ..errors import CompileError

    try:
        if args.check:
            from .. import check

            problems = check(args.model, args.target)
            for problem in problems:
                print(problem)
            if not args.quiet:
                print(f"{len(problems)} unsupported node(s)")
            return 1 if problems else 0

        from ..compiler import compile as compile_model

        signing_key = None
        if args.sign:
            from ..runtime import signing

            # Read the key first: a bad key should not cost a compile.
            signing_key = signing.load_private_key(args.sign)

        def schedule_stamp():
            path = args.emit_schedule
            return os.stat(path).st_mtime_ns if path and os.path.exists(path) else None

        stamp = schedule_stamp()
        artifact = compile_model(args.model, args.target, args.output, threads=args.threads,
                                 opt_level=args.opt_level, progress=not args.quiet,
                                 prune=args.prune, prune_threshold=args.prune_threshold,
                                 profile=args.profile, emit_schedule=args.emit_schedule,
                                 explain=args.explain, precision=args.precision,
                                 error_budget=args.error_budget, group_size=args.group_size,
                                 kv_cache=args.kv_cache, kv_block_size=args.kv_block_size,
                                 kv_dtype=args.kv_dtype, kv_error_budget=args.kv_error_budget,
                                 logits=args.logits, tokenizer=args.tokenizer)
        signature = signing.sign(artifact.path, signing_key) if signing_key else None
    except ImportError as error:  # --sign without the 'cryptography' package
        print(f"sits-compile: error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:  # options that do not go together
        print(f"sits-compile: error: {error}", file=sys.stderr)
        return 2
    except CompileError as error:
        print(f"sits-compile: error: {error}", file=sys.stderr)
        if args.emit_schedule and schedule_stamp() not in (None, stamp):
            print(f"sits-compile: the schedule written to {args.emit_schedule} stands",
                  file=sys.stderr)
        return 1
    if not args.quiet:
        from .. import runtime

        entry = artifact.manifest["entry_points"][0]
        for arg in entry["args"]:
            if arg["role"] in ("weights", "status"):
                continue
            dims = "x".join("?" if d < 0 else str(d) for d in arg["shape"]) or "scalar"
            print(f"  {arg['role']:<6s} {arg['name']}: {dims} {arg['dtype']}")
        bundled = [n for n in runtime.read_artifact(artifact.path, verify="metadata").sections
                   if n.startswith("text.")]
        if bundled:
            print(f"  text   {', '.join(n[len('text.'):] for n in bundled)}")
        size = os.path.getsize(artifact.path)
        total = sum(artifact.timings.values())
        print(f"wrote {artifact.path} ({size / 2**20:.1f} MiB) in {total:.2f} s")
        if args.emit_schedule:
            print(f"wrote {args.emit_schedule} (schedule)")
        if signature:
            print(f"wrote {signature} (signature)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
