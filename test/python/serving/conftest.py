"""Session fixtures of the serving tests: the tiny Hugging Face model folder
(tiny_llm.py: a byte-level BPE trained offline, a chat template, two EOS
ids, a 2-layer random Llama), its `transformers` reference, and the folder
compiled for serving (paged KV cache, logits of the last position, the
tokenizer bundled)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from tiny_llm import BLOCK_SIZE  # noqa: E402


@pytest.fixture(scope="session")
def hf_folder(tmp_path_factory):
    """The tiny model folder (pathlib.Path): config.json, model.safetensors,
    generation_config.json (EOS ids tiny_llm.EOS_IDS), tokenizer.json,
    tokenizer_config.json (chat template, special tokens)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from tiny_llm import build_folder

    return build_folder(tmp_path_factory.mktemp("hf") / "tiny-llama")


@pytest.fixture(scope="session")
def hf_reference(hf_folder):
    """tiny_llm.Reference: the folder's tokenizer and model loaded with
    `transformers` (`.greedy_ids(prompt_ids, n)`, `.greedy_text(prompt, n)`)."""
    from tiny_llm import Reference

    return Reference(hf_folder)


@pytest.fixture(scope="session")
def served_artifact(hf_folder, tmp_path_factory):
    """The path (str) of the folder compiled for serving with
    `sits_mlir.compile(folder, kv_cache="paged", logits="last")`: the
    tokenizer, chat template and EOS ids are bundled in it (KV blocks of
    BLOCK_SIZE tokens)."""
    import sits_mlir

    out = tmp_path_factory.mktemp("served") / "tiny-llama.sitsm"
    artifact = sits_mlir.compile(str(hf_folder), "cpu", out, threads=2, kv_cache="paged",
                                 kv_block_size=BLOCK_SIZE, logits="last")
    return artifact.path
