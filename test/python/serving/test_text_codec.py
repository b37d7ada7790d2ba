"""sits_mlir.runtime.text against transformers on the tiny model folder
(tiny_llm.py): encoding and decoding round trips, incremental decoding that
never emits half a character and adds up to the full decode (byte-level BPE
and a sentencepiece-style tokenizer with byte fallback), the chat template
rendered as transformers renders it, the EOS ids, and bad input."""

from __future__ import annotations

import json
import random
import shutil

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")

from sits_mlir.runtime import TextCodec  # noqa: E402

import tiny_llm  # noqa: E402

TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "  leading and trailing spaces  ",
    "Café déjà vu, jalapeño über naïve façade",
    "Emoji: 😀 🎉 🚀 👍🏽 ❤️ 🇫🇷 👨‍👩‍👧 🦀",
    "日本語の文章。東京は日本の首都です。中文句子，한국어 문장",
    "def f(x):\n    return x * 2\n\n\ttabs\r\nand CRLF",
    "Unseen: 🦖🦕 ☃ ∮ E⋅da = Q 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]

CONVERSATIONS = [
    [{"role": "user", "content": "Hi there 😀"}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "日本の首都は？"},
     {"role": "assistant", "content": "東京。"},
     {"role": "user", "content": "And of France?"}],
]


@pytest.fixture(scope="module")
def codec(hf_folder):
    return TextCodec.from_folder(hf_folder)


def _stream(codec, ids, prompt=(), skip_special_tokens=True):
    dec = codec.incremental_decoder(prompt, skip_special_tokens=skip_special_tokens)
    return [dec.push(t) for t in ids], dec.flush()


def test_round_trips_match_transformers(codec, hf_reference):
    tok = hf_reference.tokenizer
    for text in TEXTS:
        ids = codec.encode(text)
        assert ids == tok(text)["input_ids"], text
        assert ids[0] == codec.bos_token_id == tok.bos_token_id
        assert codec.encode(text, add_special_tokens=False) == ids[1:]
        assert codec.decode(ids) == text == tok.decode(ids, skip_special_tokens=True)
        assert codec.decode(ids, skip_special_tokens=False) == \
            tok.decode(ids, skip_special_tokens=False) == tiny_llm.BOS + text
    assert codec.vocab_size == len(tok) == tiny_llm.VOCAB_SIZE
    assert codec.eos_token_ids == tiny_llm.EOS_IDS
    assert codec.special_tokens == {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}
    # Ids past the tokenizer's vocabulary (a padded embedding) decode to nothing.
    assert codec.decode([codec.vocab_size + 7] + codec.encode("ok", False)) == "ok"


def test_incremental_decoding_never_splits_a_character(codec):
    held_back = 0
    for text in TEXTS:
        ids = codec.encode(text, add_special_tokens=False)
        parts, rest = _stream(codec, ids)
        assert "".join(parts) + rest == codec.decode(ids) == text
        assert rest == ""  # valid text: nothing is left to flush
        emitted = ""
        for part in parts:
            assert "\ufffd" not in part, (text, parts)
            emitted += part
            assert text.startswith(emitted)  # what is out stays out
        held_back += parts.count("")
    # Multi-token characters (emoji, CJK) were held back until complete.
    assert held_back > 10


def test_incremental_decoding_after_a_prompt(codec):
    prompt = codec.encode("The weather is")
    for text in (" sunny 😀 today.", "晴れ", " 👨‍👩‍👧 family"):
        ids = codec.encode(text, add_special_tokens=False)
        parts, rest = _stream(codec, ids, prompt)
        full = codec.decode(prompt + ids)
        assert "".join(parts) + rest == full[len(codec.decode(prompt)):]
    # Special tokens are skipped, or kept.
    ids = codec.encode("hi", add_special_tokens=False) + tiny_llm.EOS_IDS[:1]
    assert "".join(_stream(codec, ids)[0]) == "hi"
    assert "".join(_stream(codec, ids, skip_special_tokens=False)[0]) == "hi</s>"


def test_incremental_decoding_of_random_tokens(codec):
    """Random ids (what a random model generates: stray UTF-8 continuation
    bytes, special tokens) add up to the full decode, invalid bytes and all."""
    rng = random.Random(0)
    for _ in range(200):
        ids = [rng.randrange(codec.vocab_size) for _ in range(rng.randrange(1, 24))]
        prompt = [rng.randrange(codec.vocab_size) for _ in range(rng.randrange(0, 8))]
        parts, rest = _stream(codec, ids)
        assert "".join(parts) + rest == codec.decode(ids), ids
        parts, rest = _stream(codec, ids, prompt)
        assert "".join(parts) + rest == \
            codec.decode(prompt + ids)[len(codec.decode(prompt)):], (prompt, ids)
        assert not any(p.endswith("\ufffd") for p in parts)


def _sentencepiece_style():
    """A Llama-2-style tokenizer: "▁" for spaces (prepended to the text,
    stripped from the front when decoding) and byte-fallback tokens
    <0x00>..<0xFF> for characters outside its alphabet."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=60, show_progress=False)
    tok.train([str(tiny_llm.CORPUS)], trainer)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    # The trainer knows no byte fallback: add the byte tokens to the model.
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    return Tokenizer.from_str(json.dumps(spec))


def test_sentencepiece_style_leading_spaces_and_byte_fallback():
    codec = TextCodec(_sentencepiece_style())
    for text in TEXTS[:6]:
        ids = codec.encode(text)
        assert any(codec.tokenizer.id_to_token(i).startswith("<0x") for i in ids) or \
            text.isascii()
        parts, rest = _stream(codec, ids)
        assert "".join(parts) + rest == codec.decode(ids)
        assert not any("\ufffd" in p for p in parts)
    # A word's leading space survives the window (decoding " world" alone
    # would strip it).
    prompt = codec.encode("Hello")
    ids = codec.encode("Hello world")[len(prompt):]
    parts, rest = _stream(codec, ids, prompt)
    assert "".join(parts) + rest == " world"
    assert codec.decode(ids) == "world"


def test_chat_template_matches_transformers(codec, hf_reference):
    tok = hf_reference.tokenizer
    for messages in CONVERSATIONS:
        for prompt in (True, False):
            assert codec.apply_chat_template(messages, add_generation_prompt=prompt) == \
                tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
    text = codec.apply_chat_template(CONVERSATIONS[0])
    assert text.startswith("<s><|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")
    # The template wrote the BOS: encoding it adds none.
    assert codec.encode(text, add_special_tokens=False) == \
        tok.apply_chat_template(CONVERSATIONS[0], add_generation_prompt=True,
                                return_dict=False)


def test_chat_template_file_takes_precedence(hf_folder, tmp_path):
    """chat_template.jinja (as transformers 5 saves templates) over
    tokenizer_config.json's; a list of named templates picks "default"."""
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "m"
    shutil.copytree(hf_folder, folder)
    template = ("{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}{{ eos_token }}"
                "{% endfor %}{% if add_generation_prompt %}[ASSISTANT] {% endif %}")
    (folder / "chat_template.jinja").write_text(template)
    codec = TextCodec.from_folder(folder)
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert codec.apply_chat_template(CONVERSATIONS[1]) == \
        tok.apply_chat_template(CONVERSATIONS[1], tokenize=False, add_generation_prompt=True) \
        == "[SYSTEM] You are terse.</s>[USER] 日本の首都は？</s>[ASSISTANT] 東京。</s>" \
        "[USER] And of France?</s>[ASSISTANT] "
    (folder / "chat_template.jinja").unlink()
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = [{"name": "tool_use", "template": "tools"},
                               {"name": "default", "template": template}]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    assert TextCodec.from_folder(folder).chat_template == template
    config["chat_template"] = [{"name": "tool_use", "template": "tools"}]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="none named 'default'"):
        TextCodec.from_folder(folder)


def test_eos_ids_fall_back_to_the_tokenizer_config(hf_folder, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(hf_folder, folder)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": 4}))
    assert TextCodec.from_folder(folder).eos_token_ids == [4]
    (folder / "generation_config.json").unlink()
    assert TextCodec.from_folder(folder).eos_token_ids == [1]  # </s>, tokenizer_config.json
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": ["</s>"]}))
    with pytest.raises(ValueError, match="eos_token_id must be a token id"):
        TextCodec.from_folder(folder)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": 100000}))
    with pytest.raises(ValueError, match="EOS token id 100000 is outside the vocabulary"):
        TextCodec.from_folder(folder)


def test_bad_input(codec, hf_folder, tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        TextCodec.from_folder(tmp_path / "missing")
    with pytest.raises(ValueError, match="no tokenizer.json"):
        TextCodec.from_folder(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError, match="tokenizer.json cannot be read"):
        TextCodec.from_folder(tmp_path)
    shutil.copy(hf_folder / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="tokenizer_config.json must hold a JSON object"):
        TextCodec.from_folder(tmp_path)
    (tmp_path / "tokenizer_config.json").unlink()
    bare = TextCodec.from_folder(tmp_path)  # a tokenizer alone: no template, no EOS
    assert bare.eos_token_ids == [] and bare.chat_template is None
    with pytest.raises(ValueError, match="this model has no chat template"):
        bare.apply_chat_template(CONVERSATIONS[0])

    with pytest.raises(ValueError, match="expected text"):
        codec.encode(b"bytes")
    for bad in ([-1], [1.5], ["7"], [True], [2**40]):
        with pytest.raises(ValueError, match="token ids must be integers"):
            codec.decode(bad)
        with pytest.raises(ValueError, match="token ids must be integers"):
            codec.incremental_decoder().push(bad[0])
    for messages in ({"role": "user"}, [{"content": "no role"}], ["text"]):
        with pytest.raises(ValueError, match="messages must be a list"):
            codec.apply_chat_template(messages)
    with pytest.raises(ValueError, match="Unknown role: tool"):
        codec.apply_chat_template([{"role": "tool", "content": "x"}])
    with pytest.raises(ValueError, match="JSON values"):
        codec.apply_chat_template([{"role": "user", "content": object()}])


def test_chat_templates_are_sandboxed(hf_folder, tmp_path):
    """A template is untrusted code: reaching Python internals fails with a
    ValueError, as does a template that does not parse."""
    folder = tmp_path / "m"
    shutil.copytree(hf_folder, folder)
    for template, why in [
            ("{{ messages.__class__.__mro__ }}", "the chat template failed"),
            ("{{ ''.__class__.__subclasses__() }}", "the chat template failed"),
            ("{% set ns = namespace(_x=1) %}", "the chat template failed"),
            ("{% for m in messages %}", "does not parse")]:
        (folder / "chat_template.jinja").write_text(template)
        with pytest.raises(ValueError, match=why):
            TextCodec.from_folder(folder).apply_chat_template(CONVERSATIONS[0])
    # {% generation %} blocks (training templates) render their body.
    (folder / "chat_template.jinja").write_text(
        "{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}")
    assert TextCodec.from_folder(folder).apply_chat_template(CONVERSATIONS[0]) == "Hi there 😀"
