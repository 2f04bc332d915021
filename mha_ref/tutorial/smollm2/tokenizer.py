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

What a tokenizer does with text (encoding, control tokens, decoding, token labels) is
:class:`~mha_ref.tutorial.real_models.tokenizer.GGUFTokenizer`'s, shared by every real model;
the backend is :func:`~mha_ref.tutorial.real_models.tokenizer.byte_level_bpe`'s.
"""

from __future__ import annotations

from mha_ref.tutorial.real_models.tokenizer import (  # noqa: F401  (SmolLM2's names since 0.1)
    CONTROL_TOKEN_MODES,
    GGUFTokenizer,
    byte_level_bpe,
)

__all__ = ["SmolLM2Tokenizer"]


class SmolLM2Tokenizer(GGUFTokenizer):
    """Text to token ids and back, as SmolLM2 was trained: byte-level BPE, digits split.

    Build it with :meth:`from_metadata` (from
    :func:`mha_ref.tutorial.real_models.gguf.read_gguf`'s metadata) or from a saved copy
    (:meth:`~mha_ref.tutorial.real_models.tokenizer.GGUFTokenizer.from_json`);
    :func:`mha_ref.tutorial.smollm2.load.load_model` gives one with the model
    (``model.tokenizer``). Its methods (``encode``, ``decode``, ``token_strings``) are
    :class:`~mha_ref.tutorial.real_models.tokenizer.GGUFTokenizer`'s; ``encode`` adds no
    beginning-of-sequence token (``bos_ids`` is empty).

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

    @classmethod
    def from_metadata(cls, metadata: dict) -> SmolLM2Tokenizer:
        """Build the tokenizer from a GGUF file's ``tokenizer.ggml.*`` metadata.

        Args:
            metadata: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.metadata` of the
                SmolLM2 file.

        Returns:
            SmolLM2Tokenizer: the tokenizer.

        Raises:
            ModuleNotFoundError: if the ``tokenizers`` package is missing.
            ValueError: if the metadata describes another kind of tokenizer (not ``gpt2`` BPE
                with the ``smollm`` pre-tokenizer).
        """
        kind, pre = metadata.get("tokenizer.ggml.model"), metadata.get("tokenizer.ggml.pre")
        if (kind, pre) != ("gpt2", "smollm"):
            raise ValueError(
                f"the file describes a {kind!r} tokenizer with the {pre!r} pre-tokenizer; this "
                f"code builds SmolLM2's ('gpt2', 'smollm'). Use the SmolLM2 file (model_file())."
            )
        return cls(byte_level_bpe(metadata, split_digits=True))
