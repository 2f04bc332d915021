"""A GGUF file's tokenizer, built from its metadata with the ``tokenizers`` package.

Two kinds of tokenizer are written in the files read here, and one class uses either:

* **byte-level BPE** (``tokenizer.ggml.model = "gpt2"``, SmolLM2): every UTF-8 byte has a
  printable stand-in character (a space is ``"Ġ"``), the vocabulary's tokens are strings of
  those characters, and the file lists the merges in priority order
  (:func:`byte_level_bpe`);
* **SentencePiece BPE** (``tokenizer.ggml.model = "llama"``, Gemma 3): the tokens are text,
  a space written ``"▁"``; a byte that no token holds becomes one of 256 byte tokens
  (``<0x41>``, "byte fallback"); the file has a score per token and no merges, and the merges
  are recovered from the scores (:func:`sentencepiece_bpe`).

**Control tokens in a text.** The string ``"<|im_end|>"`` typed by a user is not the control
token ``<|im_end|>``, which only the program around a model should insert.
:meth:`GGUFTokenizer.encode` therefore refuses a text that contains the spelling of a control
token by default (``control_tokens="error"``); ``"text"`` encodes such a spelling as ordinary
characters, and ``"special"`` turns it into the control token (what a chat program does with
its own template).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from mha_ref.tutorial.real_models.packages import require_package

__all__ = ["CONTROL_TOKEN_MODES", "GGUFTokenizer", "byte_level_bpe", "sentencepiece_bpe"]

#: the three ways :meth:`GGUFTokenizer.encode` treats the spelling of a control token
CONTROL_TOKEN_MODES = ("error", "text", "special")
#: GGUF's token types (llama.cpp ``llama_token_type``): a normal piece, a control token, a
#: user-defined token (matched in the text before anything else)
_NORMAL, _CONTROL, _USER_DEFINED = 1, 3, 4


class GGUFTokenizer:
    """Text to token ids and back, as a model of a GGUF file was trained.

    Build the backend with :func:`byte_level_bpe` or :func:`sentencepiece_bpe` (from
    :func:`mha_ref.tutorial.real_models.gguf.read_gguf`'s metadata), or rebuild a saved one with
    :meth:`from_json`; each model's loader gives one with the model (``model.tokenizer``).

    Args:
        backend: a ``tokenizers.Tokenizer`` with the vocabulary, the merges, the
            pre-tokenizer or normaliser, the decoder, the control tokens as special tokens,
            and a post-processor that adds the beginning-of-sequence token where the file asks
            for one.

    Attributes:
        vocab_size (int): number of token ids.
        control_tokens (dict[str, int]): each control token's spelling and id.
        bos_ids (list[int]): what :meth:`encode` puts in front of a text by default (Gemma 3:
            ``[2]``, ``<bos>``; SmolLM2: ``[]``).

    Source:
        the ``tokenizers`` package (``Tokenizer``, ``AddedToken``, ``TemplateProcessing``).
    """

    def __init__(self, backend) -> None:
        self._backend = backend
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)
        self.control_tokens = {
            token.content: index
            for index, token in sorted(backend.get_added_tokens_decoder().items())
            if token.special
        }
        self.bos_ids = backend.encode("", add_special_tokens=True).ids

    # --------------------------------------------------------------------------------------------
    # building
    # --------------------------------------------------------------------------------------------

    @classmethod
    def from_json(cls, text: str) -> GGUFTokenizer:
        """Rebuild a tokenizer saved with :meth:`to_json` (fast: no merges to parse again).

        Args:
            text: the JSON string.

        Returns:
            GGUFTokenizer: the same tokenizer (of the class this is called on).
        """
        tokenizers = require_package("tokenizers")
        return cls(tokenizers.Tokenizer.from_str(text))

    def to_json(self) -> str:
        """The tokenizer as a ``tokenizer.json`` string (the ``tokenizers`` format)."""
        return self._backend.to_str()

    # --------------------------------------------------------------------------------------------
    # using
    # --------------------------------------------------------------------------------------------

    def encode(
        self, text: str, *, control_tokens: str = "error", add_bos: bool = True
    ) -> torch.Tensor:
        """The token ids of ``text``, after :attr:`bos_ids` (none for SmolLM2's file).

        Args:
            text: any Unicode string that UTF-8 can encode (no lone surrogate).
            control_tokens: Keyword-only. What to do with the spelling of a control token
                (``"<|im_end|>"``) inside ``text``: ``"error"`` (default) raises,
                ``"text"`` encodes it as ordinary characters, ``"special"`` makes it the
                control token's id.
            add_bos: Keyword-only. Put :attr:`bos_ids` first, as the file asks (default);
                ``False`` gives the text's tokens alone (to join pieces of one text).

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
        if not isinstance(add_bos, bool):
            raise TypeError(f"add_bos must be a bool, got {type(add_bos).__name__}.")
        self._backend.encode_special_tokens = control_tokens == "text"
        try:
            ids = self._backend.encode(text, add_special_tokens=add_bos).ids
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
    """The bytes a token stands for: a byte token ``<0xE4>`` (SentencePiece's byte fallback) is
    its one byte, a byte-level token each stand-in character's byte."""
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        return bytes([int(token[3:5], 16)])
    return bytes(_BYTES[ch] for ch in token if ch in _BYTES)


# ------------------------------------------------------------------------------------------------
# the two kinds of tokenizer in GGUF files
# ------------------------------------------------------------------------------------------------


def _require_kind(metadata: dict, kinds: tuple[str, ...], builder: str) -> None:
    """Raise unless the file's ``tokenizer.ggml.model`` is one of ``kinds``."""
    kind = metadata.get("tokenizer.ggml.model")
    if kind not in kinds:
        raise ValueError(
            f"{builder}: the file describes a {kind!r} tokenizer, this builds {kinds[0]!r} "
            f"ones. Build the tokenizer its model's loader builds."
        )


def _special_tokens(tokenizers, tokens: Sequence[str], types: Sequence[int]) -> list:
    """The control tokens as special tokens, matched in the raw text (with ``"special"``)."""
    return [
        tokenizers.AddedToken(token, special=True, normalized=False)
        for token, kind in zip(tokens, types, strict=True)
        if kind == _CONTROL
    ]


def byte_level_bpe(metadata: dict, split_digits: bool = True):
    """A byte-level BPE backend (GPT-2's kind) from a GGUF file's ``tokenizer.ggml.*`` fields.

    The vocabulary and the merges come from the file; before the merges the text is split the
    way llama.cpp's ``smollm`` pre-tokenizer does (``split_digits``: every digit on its own),
    then by GPT-2's rule into words, numbers, punctuation runs and spaces, without a prefix
    space; the control tokens (``token_type == 3``) are special tokens. No beginning-of-sequence
    token is added.

    Args:
        metadata: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.metadata`.
        split_digits: split every digit off first (llama.cpp's ``smollm``). Default: ``True``.

    Returns:
        The backend, a ``tokenizers.Tokenizer``, for :class:`GGUFTokenizer`.

    Raises:
        ModuleNotFoundError: if the ``tokenizers`` package is missing.
        ValueError: if ``tokenizer.ggml.model`` is not ``"gpt2"``.

    Source:
        Radford et al. 2019 (GPT-2), Sec. 2.2 (byte-level BPE); llama.cpp ``llama-vocab.cpp``
        (``LLAMA_VOCAB_PRE_TYPE_SMOLLM``: ``\\p{N}``, then GPT-2's split); the ``tokenizers``
        package (``models.BPE``, ``pre_tokenizers.Digits``, ``pre_tokenizers.ByteLevel``).
    """
    tokenizers = require_package("tokenizers")
    _require_kind(metadata, ("gpt2",), "byte_level_bpe")
    tokens = metadata["tokenizer.ggml.tokens"]
    vocab = {token: index for index, token in enumerate(tokens)}
    merges = [tuple(merge.split(" ")) for merge in metadata["tokenizer.ggml.merges"]]
    bpe = tokenizers.models.BPE(vocab=vocab, merges=merges)
    backend = tokenizers.Tokenizer(bpe)
    steps = [tokenizers.pre_tokenizers.Digits(individual_digits=True)] if split_digits else []
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Sequence(
        steps + [tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    backend.decoder = tokenizers.decoders.ByteLevel()
    control = _special_tokens(tokenizers, tokens, metadata["tokenizer.ggml.token_type"])
    backend.add_special_tokens(control)  # already in the vocabulary: their ids are kept
    return backend


def sentencepiece_bpe(metadata: dict):
    """A SentencePiece BPE backend with byte fallback from a GGUF file's metadata (Gemma 3).

    The file gives each token a type and a score and no merge list. A BPE merges the pair whose
    merged piece ranks highest, and SentencePiece ranks pieces by score, so the merges are
    recovered from the scores: every split of a normal piece into two normal pieces, ordered by
    the merged piece's score (ties by the two halves' ids, as ``transformers``'
    ``SentencePieceExtractor`` does). The text is not split into words first: a space becomes
    ``"▁"`` (the normaliser) and no space is put in front. The user-defined tokens (runs of
    spaces, newlines and tabs, HTML tags) are matched in the text before anything else, as
    llama.cpp does; the control tokens are special tokens; a byte no piece holds becomes its
    byte token (``<0xE4>``); and the file's ``add_bos_token`` puts ``<bos>`` first.

    Args:
        metadata: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.metadata`.

    Returns:
        The backend, a ``tokenizers.Tokenizer``, for :class:`GGUFTokenizer`.

    Raises:
        ModuleNotFoundError: if the ``tokenizers`` package is missing.
        ValueError: if ``tokenizer.ggml.model`` is not ``"llama"`` (SentencePiece).

    Source:
        Kudo and Richardson 2018, "SentencePiece", arXiv:1808.06226; llama.cpp
        ``llama-vocab.cpp`` (``LLAMA_VOCAB_TYPE_SPM``, ``tokenizer_st_partition``);
        ``transformers`` ``convert_slow_tokenizer.SentencePieceExtractor`` (merges from scores);
        the ``tokenizers`` package (``models.BPE(byte_fallback=True)``, ``decoders.ByteFallback``).
    """
    tokenizers = require_package("tokenizers")
    _require_kind(metadata, ("llama",), "sentencepiece_bpe")
    tokens = metadata["tokenizer.ggml.tokens"]
    types = np.asarray(metadata["tokenizer.ggml.token_type"])  # (vocab_size,)
    scores = np.asarray(metadata["tokenizer.ggml.scores"])  # (vocab_size,)
    vocab = {token: index for index, token in enumerate(tokens)}
    merges = _merges_from_scores(tokens, types, scores, vocab)
    unknown = tokens[int(metadata["tokenizer.ggml.unknown_token_id"])]
    bpe = tokenizers.models.BPE(
        vocab=vocab, merges=merges, unk_token=unknown, byte_fallback=True, fuse_unk=True
    )
    backend = tokenizers.Tokenizer(bpe)
    backend.normalizer = tokenizers.normalizers.Replace(" ", "\u2581")
    backend.decoder = tokenizers.decoders.Sequence([
        tokenizers.decoders.Replace("\u2581", " "),
        tokenizers.decoders.ByteFallback(),
        tokenizers.decoders.Fuse(),
    ])  # fmt: skip
    user_defined = [
        tokenizers.AddedToken(tokens[index], special=False, normalized=False)
        for index in np.flatnonzero(types == _USER_DEFINED)
    ]
    backend.add_tokens(user_defined)  # matched in the raw text, before the BPE
    backend.add_special_tokens(_special_tokens(tokenizers, tokens, types))
    if metadata.get("tokenizer.ggml.add_bos_token", False):
        bos = tokens[int(metadata["tokenizer.ggml.bos_token_id"])]
        backend.post_processor = tokenizers.processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, vocab[bos])]
        )
    return backend


def _merges_from_scores(
    tokens: Sequence[str], types: np.ndarray, scores: np.ndarray, vocab: dict[str, int]
) -> list[tuple[str, str]]:
    """Every split of a normal piece into two normal pieces, best merged score first."""
    normal = {tokens[index] for index in np.flatnonzero(types == _NORMAL)}
    ranked = []
    for index in np.flatnonzero(types == _NORMAL):
        piece = tokens[index]
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in normal and right in normal:
                ranked.append((-float(scores[index]), vocab[left], vocab[right], left, right))
    ranked.sort()
    return [(left, right) for _, _, _, left, right in ranked]
