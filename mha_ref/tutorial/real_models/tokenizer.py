"""SmolLM2's tokenizer, built from the GGUF file's metadata with the ``tokenizers`` package.

The file describes a GPT-2-style byte-level BPE (``tokenizer.ggml.model = "gpt2"``): every
UTF-8 byte has a printable stand-in character (a space is ``"Ġ"``), the vocabulary's 49,152
tokens are strings of those characters, and 48,900 merges, in priority order, join them.
Before the merges, the text is split the way llama.cpp's ``smollm`` pre-tokenizer does
(``tokenizer.ggml.pre = "smollm"``): every digit on its own, then GPT-2's split into words,
numbers, punctuation runs and spaces. The 17 tokens the file marks as control tokens
(``token_type == 3``: ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ...) are special
tokens. The file says ``add_bos_token = false``: no beginning-of-sequence token is added, so
the first token of a text is whatever the text begins with.

**Control tokens in a text.** The string ``"<|im_end|>"`` typed by a user is not the control
token ``<|im_end|>``, which only the program around a model should insert.
:meth:`SmolLM2Tokenizer.encode` therefore refuses a text that contains the spelling of a control
token by default
(``control_tokens="error"``); ``"text"`` encodes such a spelling as ordinary characters, and
``"special"`` turns it into the control token (what a chat program does with its own
template).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mha_ref.tutorial.smollm2.files import require_package

__all__ = ["CONTROL_TOKEN_MODES", "SmolLM2Tokenizer"]

#: the three ways :meth:`SmolLM2Tokenizer.encode` treats the spelling of a control token
CONTROL_TOKEN_MODES = ("error", "text", "special")
#: GGUF's token type of a control token (llama.cpp ``LLAMA_TOKEN_TYPE_CONTROL``)
_CONTROL = 3


class SmolLM2Tokenizer:
    """Text to token ids and back, as SmolLM2 was trained: byte-level BPE, digits split.

    Build it with :meth:`from_metadata` (from :func:`mha_ref.tutorial.smollm2.gguf_file.read_gguf`'s
    metadata) or :meth:`from_json` (a saved copy); :func:`mha_ref.tutorial.smollm2.load.load_model`
    gives one with the model (``model.tokenizer``).

    Args:
        backend: a ``tokenizers.Tokenizer`` with the vocabulary, merges, pre-tokenizer,
            decoder and the control tokens as special tokens.

    Attributes:
        vocab_size (int): number of token ids, 49,152.
        control_tokens (dict[str, int]): each control token's spelling and id.

    Source:
        Radford et al. 2019 (GPT-2), Sec. 2.2 (byte-level BPE); llama.cpp ``llama-vocab.cpp``
        (``LLAMA_VOCAB_PRE_TYPE_SMOLLM``: ``\\p{N}``, then GPT-2's split); the ``tokenizers``
        package (``models.BPE``, ``pre_tokenizers.Digits``, ``pre_tokenizers.ByteLevel``).
    """

    def __init__(self, backend) -> None:
        self._backend = backend
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)
        self.control_tokens = {
            token.content: index
            for index, token in sorted(backend.get_added_tokens_decoder().items())
            if token.special
        }

    # --------------------------------------------------------------------------------------------
    # building
    # --------------------------------------------------------------------------------------------

    @classmethod
    def from_metadata(cls, metadata: dict) -> SmolLM2Tokenizer:
        """Build the tokenizer from a GGUF file's ``tokenizer.ggml.*`` metadata.

        Args:
            metadata: :attr:`~mha_ref.tutorial.smollm2.gguf_file.GGUFContents.metadata` of the
                SmolLM2 file.

        Returns:
            SmolLM2Tokenizer: the tokenizer.

        Raises:
            ModuleNotFoundError: if the ``tokenizers`` package is missing.
            ValueError: if the metadata describes another kind of tokenizer (not ``gpt2`` BPE
                with the ``smollm`` pre-tokenizer).
        """
        tokenizers = require_package("tokenizers")
        kind, pre = metadata.get("tokenizer.ggml.model"), metadata.get("tokenizer.ggml.pre")
        if (kind, pre) != ("gpt2", "smollm"):
            raise ValueError(
                f"the file describes a {kind!r} tokenizer with the {pre!r} pre-tokenizer; this "
                f"code builds SmolLM2's ('gpt2', 'smollm'). Use the SmolLM2 file (model_file())."
            )
        tokens = metadata["tokenizer.ggml.tokens"]
        vocab = {token: index for index, token in enumerate(tokens)}
        merges = [tuple(merge.split(" ")) for merge in metadata["tokenizer.ggml.merges"]]
        bpe = tokenizers.models.BPE(vocab=vocab, merges=merges)
        backend = tokenizers.Tokenizer(bpe)
        backend.pre_tokenizer = tokenizers.pre_tokenizers.Sequence(
            [
                tokenizers.pre_tokenizers.Digits(individual_digits=True),
                tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        backend.decoder = tokenizers.decoders.ByteLevel()
        control = [
            tokenizers.AddedToken(token, special=True, normalized=False)
            for token, kind in zip(tokens, metadata["tokenizer.ggml.token_type"], strict=True)
            if kind == _CONTROL
        ]
        backend.add_special_tokens(control)  # already in the vocabulary: their ids are kept
        return cls(backend)

    @classmethod
    def from_json(cls, text: str) -> SmolLM2Tokenizer:
        """Rebuild a tokenizer saved with :meth:`to_json` (fast: no merges to parse again).

        Args:
            text: the JSON string.

        Returns:
            SmolLM2Tokenizer: the same tokenizer.
        """
        tokenizers = require_package("tokenizers")
        return cls(tokenizers.Tokenizer.from_str(text))

    def to_json(self) -> str:
        """The tokenizer as a ``tokenizer.json`` string (the ``tokenizers`` format)."""
        return self._backend.to_str()

    # --------------------------------------------------------------------------------------------
    # using
    # --------------------------------------------------------------------------------------------

    def encode(self, text: str, *, control_tokens: str = "error") -> torch.Tensor:
        """The token ids of ``text``; no beginning-of-sequence token is added.

        Args:
            text: any Unicode string that UTF-8 can encode (no lone surrogate).
            control_tokens: Keyword-only. What to do with the spelling of a control token
                (``"<|im_end|>"``) inside ``text``: ``"error"`` (default) raises,
                ``"text"`` encodes it as ordinary characters, ``"special"`` makes it the
                control token's id.

        Shape:
            - Output: ``(seq_len,)``, ``torch.long``.

        Returns:
            torch.Tensor: the ids.

        Raises:
            TypeError: if ``text`` is not a string.
            ValueError: if ``text`` holds a lone surrogate (``"\\ud800"``, half of a UTF-16
                pair, which UTF-8 cannot encode; the message gives its index), if
                ``control_tokens`` is not one of :data:`CONTROL_TOKEN_MODES`, or if it is
                ``"error"`` and ``text`` spells a control token (the message names it).
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        _require_utf8(text)
        if control_tokens not in CONTROL_TOKEN_MODES:
            raise ValueError(
                f"control_tokens must be one of {CONTROL_TOKEN_MODES}, got {control_tokens!r}."
            )
        if control_tokens == "error":
            found = [token for token in self.control_tokens if token in text]
            if found:
                raise ValueError(
                    f"text contains the spelling of the control token {found[0]!r}, which "
                    f"only the program around the model should insert. Pass "
                    f"control_tokens='text' to encode it as ordinary characters, or "
                    f"control_tokens='special' to make it the control token."
                )
        self._backend.encode_special_tokens = control_tokens == "text"
        try:
            ids = self._backend.encode(text, add_special_tokens=False).ids
        finally:
            self._backend.encode_special_tokens = False
        return torch.tensor(ids, dtype=torch.long)  # (seq_len,)

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """The text of ``ids``, control tokens included as their spelling.

        Args:
            ids: ``(seq_len,)`` token ids.

        Returns:
            str: the text; ``decode(encode(text)) == text`` for every text.

        Raises:
            ValueError: if an id is outside ``0 .. vocab_size - 1``.
        """
        ids = _as_id_list(ids, self.vocab_size)
        return self._backend.decode(ids, skip_special_tokens=False)

    def token_strings(self, ids: Sequence[int] | torch.Tensor) -> list[str]:
        """Each token's own text, for labels (a token may hold a part of a character's bytes,
        then its label is that part written as ``\\xNN`` escapes).

        Args:
            ids: ``(seq_len,)`` token ids.

        Returns:
            list[str]: one string per id (``" Paris"``, ``"2"``, ``"<|im_end|>"``).

        Raises:
            ValueError: if an id is outside ``0 .. vocab_size - 1``.
        """
        ids = _as_id_list(ids, self.vocab_size)
        pieces = []
        for index in ids:
            piece = self._backend.decode([index], skip_special_tokens=False)
            if "\ufffd" in piece:  # an incomplete UTF-8 sequence: show its bytes
                raw = _token_bytes(self._backend.id_to_token(index))
                piece = "".join(f"\\x{b:02x}" if b >= 0x80 else chr(b) for b in raw)
            pieces.append(piece)
        return pieces


def _require_utf8(text: str) -> None:
    """Raise ValueError naming the first lone surrogate of ``text``, which UTF-8 cannot encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        char = text[error.start]
        raise ValueError(
            f"text must be a string that UTF-8 can encode, the bytes a byte-level tokenizer "
            f"reads, but it holds the lone surrogate {char!r} (U+{ord(char):04X}) at index "
            f"{error.start}: half of a UTF-16 pair, not a character. It usually comes from "
            f"bytes decoded with errors='surrogateescape' or a JSON escape cut in half; decode "
            f"the source again, or replace it: "
            f"text.encode('utf-8', errors='replace').decode('utf-8') turns it into '?'."
        ) from None


def _as_id_list(ids: Sequence[int] | torch.Tensor, vocab_size: int) -> list[int]:
    """``ids`` as a list of ints, after checking the range."""
    values = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    if isinstance(ids, torch.Tensor) and ids.dim() != 1:
        raise ValueError(f"ids must be 1-D (seq_len,), got shape {tuple(ids.shape)}.")
    bad = [v for v in values if not isinstance(v, int) or not 0 <= v < vocab_size]
    if bad:
        raise ValueError(
            f"ids must be integers in 0 .. {vocab_size - 1}, got {bad[0]!r}. Pass the ids "
            f"that encode() returned."
        )
    return values


def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in character -> the byte it stands for."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return {chr(code): byte for byte, code in zip(printable, codes, strict=True)}


_BYTES = _byte_decoder()


def _token_bytes(token: str) -> bytes:
    """The bytes a byte-level token string stands for."""
    return bytes(_BYTES[ch] for ch in token if ch in _BYTES)
