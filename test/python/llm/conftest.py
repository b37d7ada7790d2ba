"""The exported decoders, built and compiled once per test session."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import sits_mlir  # noqa: E402

from hf_decoders import build  # noqa: E402

_CACHE: dict = {}


@pytest.fixture(scope="session", params=["gpt2", "llama"])
def compiled(request, tmp_path_factory):
    """(Decoder, loaded CompiledModel) for GPT-2 and for Llama (GQA, RoPE)."""
    if request.param not in _CACHE:
        out = tmp_path_factory.mktemp(request.param)
        dec = build(request.param, str(out))
        artifact = sits_mlir.compile(dec.path, "cpu", out / f"{request.param}.sitsm", threads=2)
        _CACHE[request.param] = (dec, artifact.load())
        # Loaded modules go with the session, not at interpreter exit (where
        # nanobind would report them as leaked).
        request.addfinalizer(lambda name=request.param: _CACHE.pop(name, None))
    return _CACHE[request.param]

