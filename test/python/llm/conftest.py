"""The exported decoders, built and compiled once per test session: with
the exported signature (contiguous past K/V) and with kv_cache="paged"."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import sits_mlir  # noqa: E402

from hf_decoders import build  # noqa: E402

from sits_mlir.runtime.decoder import PagedRunner, PastKVRunner  # noqa: E402

#: The paged models' KV block size: small, so that short prompts span blocks.
BLOCK_SIZE = 4
_DECODERS: dict = {}
_MODELS: dict = {}


@pytest.fixture(scope="session")
def llm_models(tmp_path_factory):
    """get(name, kv_cache="contiguous") -> (Decoder, loaded CompiledModel);
    kv_cache "paged-last" is kv_cache="paged" with logits="last"."""
    def get(name: str, kv_cache: str = "contiguous"):
        if name not in _DECODERS:
            _DECODERS[name] = build(name, str(tmp_path_factory.mktemp(name)))
        dec = _DECODERS[name]
        if (name, kv_cache) not in _MODELS:
            out = tmp_path_factory.mktemp(f"{name}-{kv_cache}") / f"{name}.sitsm"
            mode, _, logits = kv_cache.partition("-")
            artifact = sits_mlir.compile(dec.path, "cpu", out, threads=2, kv_cache=mode,
                                         kv_block_size=BLOCK_SIZE, logits=logits or "all")
            _MODELS[(name, kv_cache)] = artifact.load()
        return dec, _MODELS[(name, kv_cache)]
    yield get
    # Loaded modules go with the session, not at interpreter exit (where
    # nanobind would report them as leaked).
    _MODELS.clear()


@pytest.fixture(scope="session", params=["gpt2", "llama"])
def compiled(request, llm_models):
    """(Decoder, model with the exported signature) for GPT-2 and for Llama
    (GQA, RoPE)."""
    return llm_models(request.param)


@pytest.fixture(scope="session", params=[("gpt2", "contiguous"), ("gpt2", "paged"),
                                         ("llama", "contiguous"), ("llama", "paged"),
                                         ("llama", "paged-last")],
                ids=lambda p: "-".join(p))
def served(request, llm_models):
    """(Decoder, model, runner class): each decoder compiled both ways (and
    Llama paged with logits for the last position only), with the engine
    runner that serves it from the KV pool."""
    name, kv_cache = request.param
    dec, model = llm_models(name, kv_cache)
    return dec, model, PastKVRunner if kv_cache == "contiguous" else PagedRunner
