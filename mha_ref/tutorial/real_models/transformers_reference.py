"""transformers' own model of a GGUF file: the independent side of the real models' checks.

The tests compare the project's models with it (logits, losses, greedy continuations, token
ids), and ``nox -s bench`` times both on the same file. transformers reads the file with gguf-py
(its own reader and dequantiser), builds its own model class (``LlamaForCausalLM`` for
SmolLM2, ``Gemma3ForCausalLM`` for Gemma 3) and its own tokenizer; nothing of this package
reaches its side. transformers is a test-only dependency
(``python -m pip install -e '.[real-model-test]'``).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

__all__ = ["INSTALL_COMMAND", "transformers_from_gguf"]

#: what installs transformers and gguf-py at the pinned versions
INSTALL_COMMAND = "python -m pip install -e '.[real-model-test]'"


def transformers_from_gguf(path: str | Path) -> tuple:
    """transformers' model and tokenizer of the GGUF file at ``path``, offline.

    The model is float32, in eval mode, on the CPU. transformers opens the file three times
    (the config, the weights, the tokenizer), and each opening parses every metadata array
    element by element (Gemma 3's 262,144 tokens and scores: about 17 s a time on a 2-core
    machine). Here gguf-py's reader is made once and handed to each of them: the same reader
    class, the same parsed fields, read once (Gemma 3's load: 64 s to 30 s).

    Args:
        path: the model's GGUF file (``mha_ref.tutorial.real_models.smollm2.model_file()`` or
            ``mha_ref.tutorial.real_models.gemma3.model_file()``).

    Returns:
        tuple: ``(model, tokenizer)``; ``model(input_ids).logits`` is
        ``(batch, seq_len, vocab_size)`` float32.

    Raises:
        ModuleNotFoundError: if transformers or gguf is missing (see :data:`INSTALL_COMMAND`).
        RuntimeError: if transformers opened another file than ``path``.

    Source:
        ``transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)`` and
        ``AutoTokenizer.from_pretrained`` (transformers' GGUF loading, which dequantises with
        ``gguf.GGUFReader`` and ``gguf.dequantize``).
    """
    try:
        import gguf
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ModuleNotFoundError as missing:
        raise ModuleNotFoundError(
            f"transformers' reference model needs {missing.name}, which is not installed: "
            f"run {INSTALL_COMMAND}"
        ) from missing
    os.environ["HF_HUB_OFFLINE"] = "1"  # the local file only, never a model hub
    path = Path(path)
    original = gguf.GGUFReader
    readers: dict = {}

    def read_once(file, mode="r"):
        key = (os.path.realpath(file), mode)
        if key not in readers:
            readers[key] = original(file, mode)
        return readers[key]

    folder, kwargs = str(path.parent), {"gguf_file": path.name}
    gguf.GGUFReader = read_once  # transformers imports it from gguf at each load
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
    finally:
        gguf.GGUFReader = original
    if set(readers) != {(os.path.realpath(path), "r")}:
        raise RuntimeError(f"transformers opened {sorted(readers)}, expected {path} alone.")
    return model.eval(), tokenizer
