"""A Hugging Face model folder compiled into one artifact: the tokenizer,
chat template and EOS ids bundled and read back (`TextCodec.from_artifact`),
an ONNX file with `sits-compile --tokenizer DIR`, clear errors for what is
missing, and `sits-runtime` with text prompts generating transformers'
greedy text."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import sits_mlir  # noqa: E402
from sits_mlir import runtime  # noqa: E402
from sits_mlir.runtime import TextCodec  # noqa: E402

import tiny_llm  # noqa: E402
from tiny_llm import BLOCK_SIZE  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

#: With the seeded weights, greedy generation after "Once upon a time" ends
#: with an EOS id after 24 tokens; the others run to the length limit.
PROMPTS = ["The quick brown fox", "日本語の文章 😀", "Once upon a time"]


def _section(path, name: str) -> bytes:
    off, size = runtime.read_artifact(path).sections[name]
    with open(path, "rb") as f:
        f.seek(off)
        return f.read(size)


def _without_text(path, out) -> str:
    """The artifact at `path` rewritten without its text sections."""
    info = runtime.read_artifact(path)
    manifest = {k: v for k, v in info.manifest.items()
                if k not in ("format_version", "content_hash", "weights_digest")}
    runtime.write_artifact(out, manifest=manifest, code=_section(path, "code.cpu"),
                           weights=_section(path, "weights"), target="cpu")
    return str(out)


@pytest.mark.slow
def test_folder_compiles_with_its_tokenizer(served_artifact, hf_folder, hf_reference, tmp_path):
    info = runtime.read_artifact(served_artifact)
    assert {"text.tokenizer.json", "text.tokenizer_config.json",
            "text.generation_config.json"} <= set(info.sections)
    assert _section(served_artifact, "text.tokenizer.json") == \
        (hf_folder / "tokenizer.json").read_bytes()
    names = {a["name"] for a in info.manifest["entry_points"][0]["args"]}
    assert {"input_ids", "position_ids", "kv_pool", "block_tables", "logits"} <= names
    model = runtime.load(served_artifact)
    for source in (served_artifact, model, open(served_artifact, "rb").read()):
        codec = TextCodec.from_artifact(source)
        assert codec.eos_token_ids == tiny_llm.EOS_IDS and codec.bos_token_id == 0
        assert codec.encode(PROMPTS[1]) == hf_reference.tokenizer(PROMPTS[1])["input_ids"]
        assert codec.apply_chat_template([{"role": "user", "content": "hi"}]) == \
            "<s><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert TextCodec.from_artifact(_without_text(served_artifact, tmp_path / "ids.sitsm")) \
        is None


def _report(tmp_path, config, lines, *extra):
    from sits_mlir.tools import runtime as cli

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = tmp_path / "report.json"
    rc = cli.main(["--config", str(config), "--prompts", str(prompts), "--json", str(out),
                   *extra])
    return rc, json.loads(out.read_text())


@pytest.mark.slow
def test_cli_text_prompts_generate_transformers_greedy_text(served_artifact, hf_reference,
                                                            tmp_path, capsys):
    new = 32
    lines = [{"prompt": p, "max_new_tokens": new} for p in PROMPTS]
    lines.append({"prompt_ids": hf_reference.tokenizer(PROMPTS[0])["input_ids"],
                  "max_new_tokens": 5})
    rc, report = _report(tmp_path, served_artifact, lines, "--block-size", str(BLOCK_SIZE))
    assert rc == 0, capsys.readouterr().err
    stops = []
    for prompt, out in zip(PROMPTS, report["outputs"]):
        ids = hf_reference.tokenizer(prompt)["input_ids"]
        sample = out["samples"][0]
        assert sample["tokens"] == hf_reference.greedy_ids(ids, new), prompt
        assert sample["text"] == hf_reference.greedy_text(prompt, new)
        # transformers stops at the same EOS ids.
        stops.append(sample["tokens"][-1] in tiny_llm.EOS_IDS)
        assert sample["finish_reason"] == ("stop" if stops[-1] else "length")
    assert stops == [False, False, True]
    # Token-id prompts keep their report (no text) and run to max_new_tokens.
    last = report["outputs"][3]["samples"][0]
    assert "text" not in last and len(last["tokens"]) == 5


@pytest.mark.slow
def test_cli_text_prompt_without_a_tokenizer_fails_alone(served_artifact, tmp_path, capsys):
    bare = _without_text(served_artifact, tmp_path / "ids.sitsm")
    rc, report = _report(tmp_path, bare, [{"prompt": "Hello", "max_new_tokens": 2},
                                          {"prompt_ids": [0, 5, 9], "max_new_tokens": 2},
                                          {"prompt": "Hi", "prompt_ids": [1]}],
                         "--block-size", str(BLOCK_SIZE))
    assert rc == 1
    err = capsys.readouterr().err
    errors = [o["error"] for o in report["outputs"]]
    assert "prompts.jsonl:1: 'prompt' is text and the model bundles no tokenizer" in errors[0]
    assert errors[1] is None and len(report["outputs"][1]["samples"][0]["tokens"]) == 2
    assert "give 'prompt' (text) or 'prompt_ids' (token ids), not both" in errors[2]
    assert "request 0 failed" in err


@pytest.mark.slow
def test_sits_compile_onnx_with_tokenizer(hf_folder, hf_reference, tmp_path, capsys):
    """An exported ONNX decoder plus --tokenizer DIR bundles the same text
    sections as compiling the folder."""
    from sits_mlir.compiler import hf
    from sits_mlir.tools import compile as compile_cli

    onnx_path = tmp_path / "decoder.onnx"
    geometry = hf.export_folder(hf_folder, onnx_path)
    assert geometry == {"layers": 2, "kv_heads": 2, "head_dim": 16,
                        "vocab": tiny_llm.VOCAB_SIZE}
    out = tmp_path / "decoder.sitsm"
    assert compile_cli.main([str(onnx_path), "--threads", "2", "--kv-cache", "paged",
                             "--kv-block-size", str(BLOCK_SIZE), "--tokenizer",
                             str(hf_folder), "-o", str(out)]) == 0
    assert "text   tokenizer.json, tokenizer_config.json, generation_config.json" in \
        capsys.readouterr().out
    codec = TextCodec.from_artifact(out)
    assert codec.eos_token_ids == tiny_llm.EOS_IDS
    prompt = PROMPTS[0]
    rc, report = _report(tmp_path, out, [{"prompt": prompt, "max_new_tokens": 6}])
    assert rc == 0
    assert report["outputs"][0]["samples"][0]["text"] == hf_reference.greedy_text(prompt, 6)


def test_compile_errors_are_clear(hf_folder, tmp_path, monkeypatch, capsys):
    """Checked before anything is exported or compiled."""
    from sits_mlir.tools import compile as compile_cli

    with pytest.raises(sits_mlir.CompileError, match="cannot bundle the tokenizer: .*no "
                       "tokenizer.json"):
        sits_mlir.compile(str(hf_folder), tokenizer=tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(sits_mlir.CompileError, match=r"no tokenizer.json .*\(tokenizer=False"):
        sits_mlir.compile(str(empty))
    with pytest.raises(sits_mlir.CompileError, match="not a Hugging Face model folder"):
        sits_mlir.compile(str(empty), tokenizer=False)
    with pytest.raises(ValueError, match="tokenizer=True bundles the model folder's"):
        sits_mlir.compile(str(tmp_path / "x.onnx"), tokenizer=True)
    assert compile_cli.main([str(empty), "-q"]) == 1
    assert "sits-compile: error: cannot bundle the tokenizer" in capsys.readouterr().err
    # Without torch (the 'hf' extra), a folder is a CompileError naming the extra.
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(sits_mlir.CompileError, match=r"pip install 'sits-mlir\[hf\]'"):
        sits_mlir.compile(str(hf_folder), output=tmp_path / "x.sitsm")
