"""A small Hugging Face model folder built offline: a byte-level BPE trained
with `tokenizers` on data/corpus.txt (English, code, accents, emoji, CJK),
a tokenizer_config.json with a ChatML-style chat template and the special
tokens, a generation_config.json with two EOS ids, and a 2-layer Llama
(GQA) with seeded random weights from a `transformers` config.

`build_folder(path)` writes it; `Reference(path)` loads it back with
`transformers` (the reference the text side and the server are checked
against).
"""

from __future__ import annotations

import json
import os
import pathlib

CORPUS = pathlib.Path(__file__).parent / "data" / "corpus.txt"

BOS, EOS, PAD, IM_START, IM_END = "<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [BOS, EOS, PAD, IM_START, IM_END]  # ids 0..4, in this order
VOCAB_SIZE = 400
#: The model's end-of-sequence ids (generation_config.json): </s> and <|im_end|>.
EOS_IDS = [1, 4]
#: The served artifact's KV block size: small, so that short prompts span blocks.
BLOCK_SIZE = 4

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('Unknown role: ' + message['role']) }}"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def train_tokenizer(vocab_size: int = VOCAB_SIZE):
    """A byte-level BPE (GPT-2/Llama-3 style: every byte is a token, so any
    text encodes) trained on the corpus; encoding adds <s> in front."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train([str(CORPUS)], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, 0)])
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == list(range(len(SPECIAL_TOKENS)))
    return tok


def tokenizer_config(chat_template: str | None = CHAT_TEMPLATE) -> dict:
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS,
              "eos_token": {"__type": "AddedToken", "content": EOS, "lstrip": False,
                            "normalized": False, "rstrip": False, "single_word": False,
                            "special": True}, "pad_token": PAD,
              "model_max_length": 256, "clean_up_tokenization_spaces": False}
    if chat_template is not None:
        config["chat_template"] = chat_template
    return config


def build_folder(path: str | os.PathLike, *, layers: int = 2, hidden: int = 64,
                 heads: int = 4) -> pathlib.Path:
    """Writes the model folder (config.json, model.safetensors,
    generation_config.json, tokenizer.json, tokenizer_config.json) and
    returns its path."""
    import torch
    import transformers

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = pathlib.Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=1))

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads // 2,
        hidden_size=hidden, intermediate_size=2 * hidden, vocab_size=tok.get_vocab_size(),
        max_position_embeddings=256, initializer_range=0.2, bos_token_id=0,
        eos_token_id=EOS_IDS, pad_token_id=2)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=0, eos_token_id=EOS_IDS, pad_token_id=2)
    model.save_pretrained(str(folder))
    return folder


class Reference:
    """The folder loaded with `transformers`: its tokenizer and model."""

    def __init__(self, folder: str | os.PathLike):
        import transformers

        self.folder = str(folder)
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.folder)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            self.folder, attn_implementation="eager").eval()

    def greedy_ids(self, prompt_ids, max_new_tokens: int) -> list[int]:
        """`generate`'s greedy tokens after `prompt_ids`, stopping at the EOS
        ids of generation_config.json (the EOS token included)."""
        import torch

        with torch.no_grad():
            out = self.model.generate(torch.tensor([list(prompt_ids)]),
                                      attention_mask=torch.ones(1, len(prompt_ids),
                                                                dtype=torch.int64),
                                      max_new_tokens=max_new_tokens, do_sample=False)
        return out[0, len(prompt_ids):].tolist()

    def greedy_text(self, prompt: str, max_new_tokens: int) -> str:
        """The greedy continuation of `prompt` (encoded with its special
        tokens), decoded without them."""
        ids = self.tokenizer(prompt)["input_ids"]
        return self.tokenizer.decode(self.greedy_ids(ids, max_new_tokens),
                                     skip_special_tokens=True)
