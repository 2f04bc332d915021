"""The one rule for tests that read a real model's file: skip them, saying how to install it,
where the file is missing, or fail them where it must be there (``MHA_REF_REQUIRE_REAL_MODEL=1``,
as ``nox -s tests`` sets)."""

from __future__ import annotations

import os

import pytest

#: whether a missing model file (or transformers, for the cross-checks) fails the tests
REQUIRED = os.environ.get("MHA_REF_REQUIRE_REAL_MODEL") == "1"


def require_model_file(model, name: str) -> None:
    """Skip the calling test unless ``model.model_file()`` finds the pinned file; fail it
    instead where ``REQUIRED``. ``model`` is the module of a real model's file
    (``mha_ref.tutorial.smollm2.files`` or ``mha_ref.tutorial.real_models.gemma3``), ``name``
    the model's name in the message."""
    try:
        model.model_file()
    except model.ModelFileError as error:
        if REQUIRED:
            pytest.fail(f"MHA_REF_REQUIRE_REAL_MODEL=1 but the {name} file is missing: {error}")
        pytest.skip(f"{name} is not installed: {model.INSTALL_COMMAND}")


def load_with_transformers(path) -> tuple:
    """transformers' own loader on a GGUF file: ``(model, tokenizer)``, the model in float32 and
    in eval mode; the calling test is skipped where transformers is missing (failed where
    ``REQUIRED``).

    transformers builds everything from the file with gguf-py's reader: the config, the weights
    (gguf-py's dequantiser) and the tokenizer each open the file anew, and each opening parses
    every metadata array element by element (Gemma 3's 262,144 tokens and their scores: about
    17 s a time on the 2-core CI machine, three times for one load). Here gguf-py's reader is
    made once per file and handed to each of them: the same reader, the same parsed fields, read
    once. Nothing of this project reaches transformers' side of the comparison.
    """
    import importlib.util

    if importlib.util.find_spec("transformers") is None and not REQUIRED:
        pytest.skip("transformers is not installed (pip install -e '.[real-model-test]')")
    os.environ["HF_HUB_OFFLINE"] = "1"  # the local file only, never a model hub
    import gguf
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    original = gguf.GGUFReader
    readers: dict = {}

    def read_once(file, mode="r"):
        key = (os.path.realpath(file), mode)
        if key not in readers:
            readers[key] = original(file, mode)
        return readers[key]

    kwargs = {"gguf_file": path.name}
    gguf.GGUFReader = read_once  # transformers imports it from gguf at each load
    try:
        folder = str(path.parent)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
    finally:
        gguf.GGUFReader = original
    assert len(readers) == 1, f"transformers opened {len(readers)} files, expected {path} alone"
    return model.eval(), tokenizer
