"""Text in and out of a compiled decoder: the tokenizer, the chat template
and the end-of-sequence ids of a Hugging Face model.

    from sits_mlir.runtime.text import TextCodec

    codec = TextCodec.from_artifact("model.sitsm")   # bundled by sits-compile --tokenizer
    codec = TextCodec.from_folder("path/to/hf-model") # or straight from the model folder
    ids = codec.encode("Hello")                       # with the model's BOS, as transformers
    prompt = codec.apply_chat_template([{"role": "user", "content": "Hi"}])
    ids = codec.encode(prompt, add_special_tokens=False)  # the template wrote the BOS
    stream = codec.incremental_decoder(ids)
    for token in generated:
        print(stream.push(token), end="")            # never half a UTF-8 character
    print(stream.flush())

Tokenization is the `tokenizers` library's (the Rust tokenizer of
`tokenizer.json`, which `transformers`' fast tokenizers wrap); chat
templates render with `jinja2` in a sandboxed environment set up as
`transformers` sets it up. Neither needs torch or transformers
(`pip install 'sits-mlir[text]'`).

The files a codec is built from are a model folder's `tokenizer.json`
(required), `tokenizer_config.json` (special tokens, chat template),
`chat_template.jinja` (the chat template, as transformers 5 saves it; it
takes precedence), `special_tokens_map.json` (older folders) and
`generation_config.json` (the EOS ids). `tokenizer_sections(folder)` gives
them as artifact sections (`text.<file name>`), which the compiler bundles
and `from_artifact` reads back.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["IncrementalDecoder", "TextCodec", "TOKENIZER_FILES", "tokenizer_sections"]

#: The model folder's files a codec reads (tokenizer.json is required).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                   "special_tokens_map.json", "generation_config.json")
#: Artifact sections are named `text.<file name>` (names are [a-z0-9_.-], at most 39 bytes).
SECTION_PREFIX = "text."

_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                 "mask_token")
#: Tokens of the window decoded in front of the first new token (vLLM's
#: INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET): enough context for a
#: sentencepiece-style leading space or a multi-token character.
_CONTEXT_TOKENS = 5


def _missing(package: str) -> ImportError:
    return ImportError(f"sits_mlir.runtime.text needs the '{package}' package: "
                       "pip install 'sits-mlir[text]'")


def _token_content(value: Any) -> str | None:
    """A special token of tokenizer_config.json: a string, or a serialized
    AddedToken ({"content": ...})."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _read_folder(folder: str | os.PathLike) -> dict[str, bytes]:
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"{folder}: not a directory (expected a Hugging Face model folder "
                         "with tokenizer.json)")
    files = {}
    for name in TOKENIZER_FILES:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                files[name] = f.read()
    if "tokenizer.json" not in files:
        raise ValueError(f"{folder}: no tokenizer.json (SITS reads fast tokenizers; a folder "
                         "with only a slow tokenizer can be converted by loading it with "
                         "transformers.AutoTokenizer and calling save_pretrained)")
    return files


def tokenizer_sections(folder: str | os.PathLike) -> dict[str, bytes]:
    """The tokenizer files of a model folder as artifact sections
    ({"text.tokenizer.json": bytes, ...}), checked first: a ValueError says
    what is missing or malformed."""
    files = _read_folder(folder)
    TextCodec._from_files(files, os.fspath(folder))  # fail at compile time, not at serving
    return {SECTION_PREFIX + name: data for name, data in files.items()}


def _artifact_files(source: Any) -> dict[str, bytes]:
    """The `text.*` sections of an artifact (a path, a loaded CompiledModel,
    a compiler Artifact or an ArtifactInfo with a path, or the artifact's
    bytes), verified (everything but the weights digest, which does not
    cover these sections) before they are read."""
    from .artifact import read_artifact

    if isinstance(source, (bytes, bytearray, memoryview)):
        info = read_artifact(source)
        data = memoryview(source)
        return {name[len(SECTION_PREFIX):]: bytes(data[off:off + size])
                for name, (off, size) in info.sections.items()
                if name.startswith(SECTION_PREFIX)}
    path = getattr(source, "path", source)
    if path is None:
        raise ValueError(f"{source!r} has no file path: pass the artifact's path or bytes")
    path = os.fspath(path)
    info = read_artifact(path, verify="metadata")
    wanted = {name: where for name, where in info.sections.items()
              if name.startswith(SECTION_PREFIX)}
    files = {}
    with open(path, "rb") as f:
        for name, (off, size) in wanted.items():
            f.seek(off)
            data = f.read(size)
            if len(data) != size:
                raise ValueError(f"{path}: section {name} is truncated")
            files[name[len(SECTION_PREFIX):]] = data
    return files


def _json(files: Mapping[str, bytes], name: str, origin: str) -> dict:
    if name not in files:
        return {}
    try:
        value = json.loads(files[name].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{origin}: {name} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{origin}: {name} must hold a JSON object")
    return value


def _chat_template(files: Mapping[str, bytes], config: dict, origin: str) -> str | None:
    """The default chat template: chat_template.jinja, else
    tokenizer_config.json's `chat_template` (a string, or a list of
    {"name", "template"} of which the one named "default")."""
    if "chat_template.jinja" in files:
        return files["chat_template.jinja"].decode("utf-8")
    template = config.get("chat_template")
    if template is None or isinstance(template, str):
        return template
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        if isinstance(named.get("default"), str):
            return named["default"]
        raise ValueError(f"{origin}: tokenizer_config.json has several chat templates "
                         f"({', '.join(map(str, named))}) and none named 'default'")
    raise ValueError(f"{origin}: tokenizer_config.json's chat_template must be a string or a "
                     "list of named templates")


def _token_ids(value: Any, what: str, origin: str) -> list[int]:
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError(f"{origin}: {what} must be a token id or a list of them, "
                         f"got {json.dumps(value)}")
    return list(dict.fromkeys(values))  # in order, once each


class TextCodec:
    """A model's tokenizer, chat template and EOS ids (see the module
    docstring)."""

    #: The ids that end generation: generation_config.json's eos_token_id
    #: (an id or a list), else tokenizer_config.json's eos_token.
    eos_token_ids: list[int]
    bos_token_id: int | None
    #: Tokens of the tokenizer, added (special) tokens included.
    vocab_size: int
    #: The default chat template's source (None: the model has none).
    chat_template: str | None
    #: The special tokens by role ("bos_token": "<s>", ...), which chat
    #: templates see as variables.
    special_tokens: dict[str, str]

    def __init__(self, tokenizer, *, special_tokens: Mapping[str, str] | None = None,
                 chat_template: str | None = None, eos_token_ids: Sequence[int] = (),
                 bos_token_id: int | None = None, clean_up_tokenization_spaces: bool = False):
        """`tokenizer` is a `tokenizers.Tokenizer`; the other fields as
        from_folder() reads them from the folder's files."""
        self.tokenizer = tokenizer
        self.special_tokens = dict(special_tokens or {})
        self.chat_template = chat_template
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        for t in eos_token_ids:
            if not 0 <= t < self.vocab_size:
                raise ValueError(f"EOS token id {t} is outside the vocabulary "
                                 f"(size {self.vocab_size})")
        self.eos_token_ids = list(eos_token_ids)
        self.bos_token_id = bos_token_id
        self.clean_up_tokenization_spaces = clean_up_tokenization_spaces
        self._template = None

    # ------------------------------------------------------------- construction
    @classmethod
    def from_folder(cls, folder: str | os.PathLike) -> "TextCodec":
        """The codec of a Hugging Face model folder (tokenizer.json and the
        files next to it, see TOKENIZER_FILES)."""
        return cls._from_files(_read_folder(folder), os.fspath(folder))

    @classmethod
    def from_artifact(cls, path_or_loaded: Any) -> "TextCodec | None":
        """The codec bundled in an artifact (a path, a loaded model, a
        compiler Artifact, or the artifact's bytes), or None when it bundles
        no tokenizer."""
        files = _artifact_files(path_or_loaded)
        if "tokenizer.json" not in files:
            return None
        origin = getattr(path_or_loaded, "path", None) or (
            os.fspath(path_or_loaded) if isinstance(path_or_loaded, (str, os.PathLike))
            else "the artifact")
        return cls._from_files(files, os.fspath(origin))

    @classmethod
    def _from_files(cls, files: Mapping[str, bytes], origin: str) -> "TextCodec":
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise _missing("tokenizers") from None
        try:
            tokenizer = Tokenizer.from_str(files["tokenizer.json"].decode("utf-8"))
        except Exception as e:  # the Rust parser's errors are plain Exceptions
            raise ValueError(f"{origin}: tokenizer.json cannot be read: {e}") from None
        config = _json(files, "tokenizer_config.json", origin)
        legacy = _json(files, "special_tokens_map.json", origin)
        generation = _json(files, "generation_config.json", origin)
        special = {}
        for key in _SPECIAL_KEYS:
            content = _token_content(config.get(key, legacy.get(key)))
            if content is not None:
                special[key] = content

        def token_id(key: str) -> int | None:
            return tokenizer.token_to_id(special[key]) if key in special else None

        if generation.get("eos_token_id") is not None:
            eos = _token_ids(generation["eos_token_id"], "generation_config.json's eos_token_id",
                             origin)
        else:
            eos = [] if token_id("eos_token") is None else [token_id("eos_token")]
        bos = token_id("bos_token")
        if bos is None and isinstance(generation.get("bos_token_id"), int):
            bos = generation["bos_token_id"]
        return cls(tokenizer, special_tokens=special,
                   chat_template=_chat_template(files, config, origin), eos_token_ids=eos,
                   bos_token_id=bos,
                   clean_up_tokenization_spaces=bool(config.get("clean_up_tokenization_spaces")))

    # ------------------------------------------------------------- tokens
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`; with `add_special_tokens` the tokenizer's
        post-processor adds what the model expects around it (its BOS), as
        transformers' `tokenizer(text)` does. Text from a chat template
        already holds them: encode it with add_special_tokens=False."""
        if not isinstance(text, str):
            raise ValueError(f"expected text (str), got {type(text).__name__}")
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """The text of token ids (without the special tokens unless
        `skip_special_tokens` is False). Ids past the tokenizer's vocabulary
        (a model's embedding is often padded beyond it) decode to nothing,
        as in transformers; ValueError for anything but non-negative
        integers."""
        ids = self._check_ids(ids)
        text = self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
        if self.clean_up_tokenization_spaces:
            text = _clean_up_tokenization(text)
        return text

    def _check_ids(self, ids: Iterable[int]) -> list[int]:
        out = []
        for i, t in enumerate(ids):
            try:
                v = int(t)
                ok = v == t and not isinstance(t, bool) and 0 <= v < 1 << 32
            except (TypeError, ValueError, OverflowError):
                ok = False
            if not ok:
                raise ValueError(f"ids[{i}] = {t!r}: token ids must be integers in [0, 2^32)")
            out.append(v)
        return out

    def incremental_decoder(self, prompt_ids: Sequence[int] = (),
                            skip_special_tokens: bool = True) -> "IncrementalDecoder":
        """A decoder of the tokens generated after `prompt_ids` (whose last
        few tokens give the first new token its context: a leading space,
        the rest of a character)."""
        return IncrementalDecoder(self, prompt_ids, skip_special_tokens)

    # ------------------------------------------------------------- chat
    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True,
                            **variables: Any) -> str:
        """The prompt text of a conversation, rendered by the model's Jinja
        chat template as transformers renders it (sandboxed; `bos_token`,
        `eos_token`, ..., `raise_exception`, `strftime_now` available;
        `variables` are passed on, e.g. `tools`). ValueError when the model
        has no chat template, the messages are not a list of
        {"role", ...} objects, or the template rejects them."""
        if self.chat_template is None:
            raise ValueError("this model has no chat template (tokenizer_config.json has no "
                             "chat_template and there is no chat_template.jinja): use "
                             "completions with a prompt instead")
        if not isinstance(messages, list) or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
            raise ValueError("messages must be a list of objects with a string 'role'")
        import jinja2

        template = self._compiled_template()
        context = {**self.special_tokens, "tools": None, "documents": None,
                   **_plain(variables, "variables")}
        try:
            return template.render(messages=_plain(messages, "messages"),
                                   add_generation_prompt=bool(add_generation_prompt), **context)
        except jinja2.TemplateError as e:  # raise_exception(), bad access, sandbox violations
            raise ValueError(f"the chat template failed: {e}") from None

    def _compiled_template(self):
        if self._template is None:
            self._template = _compile_template(self.chat_template)
        return self._template


class IncrementalDecoder:
    """Decodes generated tokens one at a time into text that never ends in
    half a UTF-8 character (vLLM's and TGI's "prefix offset / read offset"
    method): each push decodes a window of the last tokens twice, without
    and with the new ones, and emits the difference once it no longer ends
    in U+FFFD (the replacement character of an incomplete byte sequence).
    Decoding a window rather than the token alone gives byte-level BPE its
    multi-token characters and sentencepiece-style tokenizers their leading
    spaces. The pushes and the flush together give the text of the tokens
    decoded at once."""

    def __init__(self, codec: TextCodec, prompt_ids: Sequence[int] = (),
                 skip_special_tokens: bool = True):
        self._codec = codec
        self._skip = skip_special_tokens
        # Only the prompt's last tokens matter: they are the first window's context.
        self._ids = codec._check_ids(list(prompt_ids)[-_CONTEXT_TOKENS:])
        self._prefix, self._read = 0, len(self._ids)

    def _decode(self, ids: list[int]) -> str:
        return self._codec.tokenizer.decode(ids, skip_special_tokens=self._skip)

    def _advance(self, force: bool) -> str:
        prefix_text = self._decode(self._ids[self._prefix:self._read])
        text = self._decode(self._ids[self._prefix:])
        if len(text) <= len(prefix_text) or (text.endswith("\ufffd") and not force):
            return ""
        # The window moves on; the tokens before it are no longer needed.
        del self._ids[:self._read]
        self._prefix, self._read = 0, len(self._ids)
        return text[len(prefix_text):]

    def push(self, token_id: int) -> str:
        """Adds a generated token; returns the text it completes (often "",
        while a character or a word is incomplete)."""
        self._ids.extend(self._codec._check_ids([token_id]))
        return self._advance(force=False)

    def flush(self) -> str:
        """The text held back (an incomplete character at the end of the
        generation decodes to U+FFFD, as in a full decode)."""
        return self._advance(force=True)


def _plain(value: Any, where: str) -> Any:
    """A fresh copy of `value` made of JSON types only (str, int, float,
    bool, None, lists and string-keyed dicts), which is all a template may
    see: other objects could have methods the sandbox does not know to be
    unsafe. ValueError naming where anything else is."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError(f"{where}: keys must be strings")
        return {str(k): _plain(v, f"{where}.{k}") for k, v in value.items()}
    raise ValueError(f"{where}: a chat template takes JSON values, not {type(value).__name__}")


def _clean_up_tokenization(text: str) -> str:
    """transformers' clean_up_tokenization (tokenizer_config.json's
    clean_up_tokenization_spaces)."""
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                 (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text


def _compile_template(source: str):
    """The chat template compiled in the environment transformers renders
    chat templates in (chat_template_utils._compile_jinja_template): an
    immutable sandbox with trim_blocks and lstrip_blocks, loop controls,
    `{% generation %}` blocks (rendered as their body), a `tojson` that
    keeps non-ASCII text, `raise_exception`, `strftime_now`, and `dict` and
    `namespace` that cannot reach Python internals. Templates come with
    models from anywhere: they are untrusted code."""
    try:
        import jinja2
        import jinja2.ext
        import jinja2.nodes
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise _missing("jinja2") from None

    class GenerationBlocks(jinja2.ext.Extension):
        # Training templates mark the assistant's text; rendering keeps it as is.
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body) \
                .set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    class TemplateDict:
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"chat templates cannot set underscore-prefixed attributes ({name!r})")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlocks, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now,
                       dict=TemplateDict(), namespace=TemplateNamespace)
    try:
        return env.from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise ValueError(f"the chat template does not parse: {e}") from None
