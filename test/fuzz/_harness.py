"""The shared runner of the atheris fuzz targets in this directory (README.md).

A target module defines `one_input(data: bytes)` (the contract: it returns,
or raises an error the contract does not allow) and calls `main()` when it
runs as a script:

    python test/fuzz/onnx_import_fuzz.py --seconds 600 [libFuzzer flags] [crash files]

`main()` runs the script again as a child process, which instruments SITS's
own Python modules for coverage and runs libFuzzer for `--seconds` with a
per-input `-timeout`, an `-rss_limit_mb`, new corpus entries written to a
temporary directory (generated seeds and the checked-in `corpus/<target>/`
are further, read-only seed directories) and crash reproducers written to
`--crash-dir`. Files given instead of directories are run once each
(reproduction). Without atheris (the test suite's regression replay) the
targets' `one_input` runs as plain Python.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import importlib.util
import os
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import traceback
import zlib
from typing import Callable, Iterable, Optional, Sequence

FUZZ_DIR = pathlib.Path(__file__).resolve().parent
ROOT = FUZZ_DIR.parents[1]
CORPUS_DIR = FUZZ_DIR / "corpus"
REGRESSIONS_DIR = FUZZ_DIR / "regressions"

#: SITS's own Python, which is instrumented; the MLIR bindings that
#: sits_mlir re-roots (ir, dialects, passmanager, _mlir_libs, ...) are not.
OWN_MODULES = ("sits_mlir.errors", "sits_mlir.targets", "sits_mlir.frontend",
               "sits_mlir.runtime", "sits_mlir.tools", "sits_mlir.compiler",
               "sits_mlir.schedule", "sits_mlir.explain", "sits_mlir.testing")

#: libFuzzer's defaults for every target (flags given on the command line
#: come after these, and the last occurrence of a flag wins).
TIMEOUT_S = 10
RSS_LIMIT_MB = 3072

# What the parent (`main`) tells the fuzzing child process.
_CHILD = "SITS_FUZZ_CHILD"
_SEEDS_ENV = "SITS_FUZZ_SEED_DIR"
_KNOWN_ENV = "SITS_FUZZ_KNOWN"
_NOTES_ENV = "SITS_FUZZ_NOTES_DIR"
_SCRATCH_ENV = "SITS_FUZZ_SCRATCH_DIR"


def fuzzing() -> bool:
    """Whether this process runs a fuzz target of this directory as its
    script (the test suite's replay imports the targets instead)."""
    if os.environ.get(_CHILD) != "1":
        return False
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path:
        return False
    path = pathlib.Path(path).resolve()
    return path.parent == FUZZ_DIR and path.name.endswith("_fuzz.py")


def _own(name: str) -> bool:
    return name == "sits_mlir" or any(name == m or name.startswith(m + ".")
                                      for m in OWN_MODULES)


def _package_modules(package: str) -> list[str]:
    """Every module name under `package`, from its files (nothing is
    imported)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    names = []
    for location in spec.submodule_search_locations:
        base = pathlib.Path(location)
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if all(p.isidentifier() for p in parts):
                names.append(".".join([package, *parts]))
    return sorted(set(names))


@contextlib.contextmanager
def instrumented(*packages: str):
    """Imports `packages` and every module below them, instrumented for
    coverage when a target runs as the fuzzer (sits_mlir's own modules
    only); other imports in the block are instrumented the same way. Outside
    fuzzing this only imports."""
    if not fuzzing():
        for p in packages:
            importlib.import_module(p)
        yield
        return
    import atheris

    foreign = [m for m in _package_modules("sits_mlir") if not _own(m)]
    with atheris.instrument_imports(include=["sits_mlir"], exclude=foreign):
        for p in packages:
            for name in [p, *_package_modules(p)]:
                if name.endswith(".__main__"):
                    continue
                importlib.import_module(name)
        yield


# -- contract checks shared by the targets -------------------------------------

def frames_of(error: BaseException) -> list[str]:
    """`file:function` of each frame of `error`'s traceback, innermost
    last."""
    return [f"{pathlib.Path(f.filename).name}:{f.name}"
            for f in traceback.extract_tb(error.__traceback__)]


def signature(error: BaseException) -> str:
    """A finding's signature: the exception type and message, then the
    frames it came through (what `--known` patterns are matched against)."""
    return f"{type(error).__name__}: {error}\n" + " < ".join(reversed(frames_of(error)))


_KNOWN: list[re.Pattern] = []
_NOTES_DIR: Optional[pathlib.Path] = None
_NOTED: set = set()


def note(key: str, data: bytes) -> None:
    """Records `data` as the first input to show `key` (something the
    contract allows but worth a look, e.g. an internal error reported as a
    CompileError, or a known finding skipped with --known) in the
    --notes-dir, once per key."""
    if _NOTES_DIR is None or key in _NOTED:
        return
    _NOTED.add(key)
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    (_NOTES_DIR / f"note-{digest}").write_bytes(data)
    (_NOTES_DIR / f"note-{digest}.txt").write_text(key + "\n")


#: Coverage counters for outcomes the instrumentation cannot see (reserved
#: when fuzzing starts; empty otherwise).
_FEEDBACK: list = []
FEEDBACK_COUNTERS = 4096


def feedback(*parts) -> None:
    """Counts an outcome as coverage: which check of native code (the C++
    runtime, onnx.checker, ONNX's shape inference) refused an input, which
    diagnostic a CompileError carries, which state the engine reached.
    libFuzzer then keeps the inputs that reach a new one, as it does for new
    Python branches."""
    if not _FEEDBACK:
        return
    import atheris

    key = " ".join(str(p) for p in parts)
    # Digits and long quoted text (what mutants make up) do not make an outcome.
    key = re.sub(r"\d+", "#", re.sub(r"'[^']{24,}'|\"[^\"]{24,}\"", "''", key))[:160]
    atheris._trace_branch(_FEEDBACK[zlib.crc32(key.encode()) % len(_FEEDBACK)])


def _guarded(one_input: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """`one_input`, with findings matching a --known pattern noted and
    dismissed, so that a campaign goes on past a finding already reported."""
    if not _KNOWN:
        return one_input

    def run(data: bytes) -> None:
        try:
            one_input(data)
        except Exception as e:
            sig = signature(e)
            if any(p.search(sig) for p in _KNOWN):
                note("known: " + sig.splitlines()[0][:200], data)
                return
            raise
    return run


_INTERESTING = [b"\x00", b"\xff", b"\x7f", b"\x80", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff",
                b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80", b"\x00" * 8, b"\xff" * 8, b"\x01"]


def raw_mutate(data: bytes, max_size: int, seed: int) -> bytes:
    """Byte-level mutations of `data` (a few bit flips, interesting bytes,
    insertions, erasures, duplicated chunks), for the parsers: in Python,
    as atheris.Mutate ends the process when libFuzzer does not offer its
    mutations (now and then, inside a custom mutator)."""
    rng = random.Random(seed)
    out = bytearray(data[:max_size]) or bytearray(b"\0")
    for _ in range(rng.choice([1, 1, 2, 4])):
        if not out:
            out.append(rng.randrange(256))
        i = rng.randrange(len(out))
        r = rng.random()
        if r < 0.35:
            out[i] ^= 1 << rng.randrange(8)
        elif r < 0.55:
            chunk = rng.choice(_INTERESTING)
            out[i:i + len(chunk)] = chunk
        elif r < 0.7:
            out.insert(i, rng.randrange(256))
        elif r < 0.85 and len(out) > 1:
            del out[i:i + rng.choice([1, 1, 2, 8, 64])]
        else:
            j = rng.randrange(len(out))
            out[i:i] = out[j:j + rng.choice([1, 4, 16, 64])]
    return bytes(out[:max_size]) or b"\0"


def _safe_mutator(mutator):
    """A custom mutator that never raises: a bug in the mutator must not
    look like a finding."""
    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        try:
            out = mutator(data, max_size, seed)
            if isinstance(out, (bytes, bytearray)) and 0 < len(out) <= max_size:
                return bytes(out)
        except Exception:  # noqa: BLE001 - mutators see arbitrary bytes
            pass
        return raw_mutate(data, max_size, seed)
    return mutate


def _safe_crossover(crossover):
    """A custom crossover that never raises (atheris.Mutate is not available
    in a crossover: the fallback is the first input)."""
    def cross(data1: bytes, data2: bytes, max_out_size: int, seed: int) -> bytes:
        try:
            out = crossover(data1, data2, max_out_size, seed)
            if isinstance(out, (bytes, bytearray)) and 0 < len(out) <= max_out_size:
                return bytes(out)
        except Exception:  # noqa: BLE001
            pass
        return data1[:max_out_size]
    return cross


def _parser(name: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{name}_fuzz.py",
        description=f"Coverage-guided fuzzing of SITS's {name} surface with atheris "
                    "(test/fuzz/README.md). Other flags go to libFuzzer (-runs=N, -seed=N, "
                    "-timeout=S, ...); files are inputs to run once each (reproduction).",
        allow_abbrev=False)
    p.add_argument("--seconds", type=int,
                   default=int(os.environ.get("SITS_FUZZ_SECONDS", "60")),
                   help="campaign length (default: $SITS_FUZZ_SECONDS or 60)")
    p.add_argument("--crash-dir", type=pathlib.Path,
                   help=f"where crash/timeout/oom reproducers go (default: ./fuzz-crashes/{name})")
    p.add_argument("--corpus-dir", type=pathlib.Path,
                   help="where new corpus entries go (default: a temporary directory, "
                        "removed at the end)")
    p.add_argument("--notes-dir", type=pathlib.Path,
                   help="record the first input of each allowed-but-suspicious outcome "
                        "(and of each --known finding) here")
    p.add_argument("--known", action="append", default=[], metavar="REGEX",
                   help="dismiss (and note) findings whose signature (type: message, "
                        "then the frames) matches; repeatable")
    return p


def main(name: str, one_input: Callable[[bytes], None], *,
         custom_mutator: Optional[Callable[[bytes, int, int], bytes]] = None,
         custom_crossover: Optional[Callable[[bytes, bytes, int, int], bytes]] = None,
         seeds: Optional[Callable[[], Iterable[bytes]]] = None, max_len: int = 4096,
         setup: Optional[Callable[[], None]] = None,
         argv: Optional[Sequence[str]] = None) -> int:
    """Runs target `name` under libFuzzer (see the module docstring) in a
    child process, and returns its exit status: 0 when the campaign ended
    with no finding. `seeds()` gives generated seed inputs (next to the
    checked-in corpus); `setup()` runs before them and the first input (a
    compile). The child is this script again: libFuzzer ends its process
    with exit(), which leaves nothing to clean up the temporary
    directories."""
    if os.environ.get(_CHILD) == "1":
        _child(one_input, custom_mutator, custom_crossover, seeds, setup)
        return 1  # not reached: libFuzzer exits
    args, rest = _parser(name).parse_known_args(sys.argv[1:] if argv is None else argv)
    flags = [a for a in rest if a.startswith("-")]
    paths = [pathlib.Path(a) for a in rest if not a.startswith("-")]
    files = [p for p in paths if not p.is_dir()]
    dirs = [p for p in paths if p.is_dir()]
    crash_dir = (args.crash_dir or pathlib.Path("fuzz-crashes") / name).resolve()
    crash_dir.mkdir(parents=True, exist_ok=True)
    before = set(crash_dir.iterdir())
    env = dict(os.environ)
    env[_CHILD] = "1"
    env[_KNOWN_ENV] = "\n".join(args.known)
    if args.notes_dir is not None:
        args.notes_dir.mkdir(parents=True, exist_ok=True)
        env[_NOTES_ENV] = str(args.notes_dir.resolve())
    with tempfile.TemporaryDirectory(prefix=f"sits-fuzz-{name}-") as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "scratch").mkdir()
        env[_SCRATCH_ENV] = str(tmp / "scratch")
        libfuzzer = [f"-timeout={TIMEOUT_S}", f"-rss_limit_mb={RSS_LIMIT_MB}",
                     f"-max_len={max_len}", "-print_final_stats=1",
                     f"-artifact_prefix={crash_dir}{os.sep}"]
        if files:  # reproduction: each file once
            libfuzzer += flags + [str(f.resolve()) for f in files]
        else:
            corpus = args.corpus_dir.resolve() if args.corpus_dir else tmp / "corpus"
            corpus.mkdir(parents=True, exist_ok=True)
            generated = tmp / "seeds"
            generated.mkdir()
            env[_SEEDS_ENV] = str(generated)
            seed_dirs = [generated]
            checked_in = CORPUS_DIR / name
            if checked_in.is_dir() and any(checked_in.iterdir()):
                seed_dirs.append(checked_in)
            libfuzzer += [f"-max_total_time={args.seconds}"] + flags + \
                [str(corpus)] + [str(d) for d in seed_dirs + dirs]
        script = str(pathlib.Path(sys.argv[0]).resolve())
        rc = subprocess.run([sys.executable, script, *libfuzzer], env=env).returncode
    found = sorted(set(crash_dir.iterdir()) - before)
    if found and not files:
        print(f"==> {name}: {len(found)} finding(s) in {crash_dir}:", file=sys.stderr)
        for f in found:
            print(f"    {f}\n    reproduce: python {script} {f}", file=sys.stderr)
    return rc


_SCRATCH: list = []


def scratch_dir() -> pathlib.Path:
    """A directory for what a target builds at start (compiled models),
    removed with the campaign: libFuzzer ends the fuzzing process with
    exit(), so the parent (`main`) owns it; elsewhere (replay) a temporary
    directory removed at exit."""
    if not _SCRATCH:
        given = os.environ.get(_SCRATCH_ENV)
        if given:
            _SCRATCH.append(pathlib.Path(given))
        else:
            import atexit
            import shutil

            d = pathlib.Path(tempfile.mkdtemp(prefix="sits-fuzz-scratch-"))
            atexit.register(shutil.rmtree, d, ignore_errors=True)
            _SCRATCH.append(d)
    return _SCRATCH[0]


def plain_env() -> dict:
    """This process's environment without the fuzzing child's variables:
    for helper subprocesses (a compile), which must not fuzz or be
    instrumented."""
    return {k: v for k, v in os.environ.items()
            if k not in (_CHILD, _SEEDS_ENV, _KNOWN_ENV, _NOTES_ENV, _SCRATCH_ENV)}


def _child(one_input, custom_mutator, custom_crossover, seeds, setup) -> None:
    """The fuzzing process: libFuzzer's flags and directories in sys.argv."""
    global _NOTES_DIR
    import atheris

    _KNOWN.extend(re.compile(k) for k in os.environ.get(_KNOWN_ENV, "").splitlines() if k)
    if os.environ.get(_NOTES_ENV):
        _NOTES_DIR = pathlib.Path(os.environ[_NOTES_ENV])
    if setup is not None:
        setup()
    seed_dir = os.environ.get(_SEEDS_ENV)
    if seed_dir and seeds is not None:
        for data in seeds():
            (pathlib.Path(seed_dir) / hashlib.sha1(data).hexdigest()).write_bytes(data)
    _FEEDBACK.extend(atheris._reserve_counter() for _ in range(FEEDBACK_COUNTERS))
    kwargs = {}
    if custom_mutator is not None:
        kwargs["custom_mutator"] = _safe_mutator(custom_mutator)
    if custom_crossover is not None:
        kwargs["custom_crossover"] = _safe_crossover(custom_crossover)
    atheris.Setup(sys.argv, _guarded(one_input), **kwargs)
    atheris.Fuzz()


def replay(one_input: Callable[[bytes], None], path: pathlib.Path) -> None:
    """Runs one input file through `one_input`, as plain Python."""
    one_input(pathlib.Path(path).read_bytes())


def regression_files(name: str) -> list[pathlib.Path]:
    d = REGRESSIONS_DIR / name
    return sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith(".")
                  and p.suffix not in (".md", ".txt")) if d.is_dir() else []
