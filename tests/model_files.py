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
    instead where ``REQUIRED``. ``model`` is a real model's module
    (``mha_ref.tutorial.real_models.smollm2`` or ``...gemma3``), ``name`` the model's name in
    the message."""
    try:
        model.model_file()
    except model.ModelFileError as error:
        if REQUIRED:
            pytest.fail(f"MHA_REF_REQUIRE_REAL_MODEL=1 but the {name} file is missing: {error}")
        pytest.skip(f"{name} is not installed: {model.INSTALL_COMMAND}")



def load_with_transformers(path) -> tuple:
    """transformers' ``(model, tokenizer)`` of a GGUF file
    (:func:`mha_ref.tutorial.real_models.transformers_reference.transformers_from_gguf`); the
    calling test is skipped where transformers is missing, failed where ``REQUIRED``."""
    import importlib.util

    if importlib.util.find_spec("transformers") is None and not REQUIRED:
        pytest.skip("transformers is not installed (pip install -e '.[real-model-test]')")
    from mha_ref.tutorial.real_models.transformers_reference import transformers_from_gguf

    return transformers_from_gguf(path)
