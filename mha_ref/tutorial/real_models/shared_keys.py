"""What one key/value head per block means for the head tools: example 26's measurements.

In grouped-query attention several query heads read one key/value head. Gemma 3 270M has one
key/value head per block, read by all four query heads (multi-query attention); SmolLM2 has
three per block, query heads ``3g, 3g+1, 3g+2`` reading head ``g``. The head tools
(:func:`~mha_ref.tutorial.real_models.heads.ablate_heads`) act on one query head's output; an
intervention on a key/value head itself (the output of ``k_proj`` or ``v_proj``) reaches every
query head of the group at once. Measured
here on example 25's repeated random sequences
(:func:`~mha_ref.tutorial.real_models.local_global.copy_after_gap`, the first distance), in the
blocks of two of example 25's induction heads:

- zeroing a key/value head's values (:func:`zeroed_values`) against zero-ablating every query
  head that reads it;
- each query head of the group ablated alone, and the whole group;
- in Gemma, whose blocks normalise the attention output again before adding it to the stream,
  the same ablations with that norm held at its clean scale (:func:`frozen_norm_scale`): the
  norm rescales what the heads left in place write, so an ablation there is not only the
  removal of one head's output.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.real_models.gemma3 import MODEL_FILE_SHA256, load_gemma3
from mha_ref.tutorial.real_models.layers import RMSNorm
from mha_ref.tutorial.real_models.loading import model_threads
from mha_ref.tutorial.real_models.local_global import (
    COPY_LEN,
    DISTANCES,
    GEMMA3_ORDINARY_IDS,
    SEEDS,
    SMOLLM2_FIRST_ID,
    SMOLLM2_ORDINARY_IDS,
    _clean_pass,
    _copy_losses,
    copy_after_gap,
)
from mha_ref.tutorial.real_models.smollm2 import MODEL_FILE_SHA256 as SMOLLM2_SHA256
from mha_ref.tutorial.real_models.smollm2 import load_smollm2

__all__ = [
    "BLOCKS",
    "frozen_norm_scale",
    "inverse_rms",
    "shared_keys_analysis",
    "zeroed_values",
]

#: the blocks measured, each with the key/value head read there; Gemma's global block 11, which
#: holds (11, 2), the head whose ablation alone undoes example 25's copy, and SmolLM2's block 17,
#: whose key/value head 1 is read by two of its top three (query heads 3, 4 and 5)
BLOCKS = {"gemma3": ((11, 0),), "smollm2": ((17, 1),)}


@contextmanager
def zeroed_values(model, layer: int, kv_heads: Sequence[int]) -> Iterator[None]:
    """Inside the block, the value vectors of ``kv_heads`` in block ``layer`` are zero.

    A forward hook on the block's ``attention.v_proj`` returns a copy of its output with those
    heads' ``head_dim`` columns set to 0; every query head that reads them then attends to
    zeros. Leaving the block removes the hook, even after an exception.

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``).
        layer: the block, ``0 .. num_layers - 1``.
        kv_heads: key/value heads of that block, each ``0 .. num_kv_heads - 1``.

    Shape:
        - ``v_proj``'s output: ``(batch, seq_len, num_kv_heads * head_dim)``; head ``g`` is
          columns ``g * head_dim .. (g + 1) * head_dim - 1``.

    Raises:
        ValueError: if ``layer`` or a key/value head does not exist, or ``kv_heads`` is empty.

    Source:
        Ainslie et al. 2023, "GQA", arXiv:2305.13245, Sec. 2 (query heads grouped over shared
        key/value heads); the zero ablation of Michel et al. 2019, arXiv:1905.10650, Sec. 2,
        applied to a key/value head.
    """
    config = model.config
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < config.num_layers:
        raise ValueError(
            f"layer must be a block 0 .. {config.num_layers - 1}, got {layer!r}."
        )
    kv_heads = list(kv_heads)
    bad = [g for g in kv_heads if isinstance(g, bool) or not isinstance(g, int)
           or not 0 <= g < config.num_kv_heads]  # fmt: skip
    if not kv_heads or bad:
        raise ValueError(
            f"kv_heads must name key/value heads 0 .. {config.num_kv_heads - 1} of the block, "
            f"got {kv_heads!r}."
        )
    head_dim = config.head_dim

    def hook(module, args, output):  # output: (batch, seq_len, num_kv_heads * head_dim)
        output = output.clone()
        for g in kv_heads:
            output[..., g * head_dim : (g + 1) * head_dim] = 0
        return output

    handle = model.layers[layer].attention.v_proj.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def inverse_rms(norm: RMSNorm, x: torch.Tensor) -> torch.Tensor:
    """The factor ``norm`` multiplies ``x`` by before its gain, ``1 / sqrt(mean(x^2) + eps)``.

    Args:
        norm: an :class:`~mha_ref.tutorial.real_models.layers.RMSNorm`.
        x: ``(..., dim)`` its input.

    Returns:
        torch.Tensor: ``(..., 1)`` float32.

    Source:
        Zhang and Sennrich 2019, arXiv:1910.07467, eq. 4 (as
        :class:`~mha_ref.tutorial.real_models.layers.RMSNorm` computes it).
    """
    return torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + norm.eps)  # (..., 1)


@contextmanager
def frozen_norm_scale(norm: RMSNorm, scale: torch.Tensor) -> Iterator[None]:
    """Inside the block, ``norm`` multiplies its input by ``scale`` instead of its own
    :func:`inverse_rms`, then by its gain: a norm held at the scale it had on another run.

    With ``scale = inverse_rms(norm, x)`` recorded on a clean run, the clean run's output is
    unchanged bit for bit, and an ablation upstream changes the output only by what it
    removes: the norm no longer rescales what the other heads write.

    Args:
        norm: an :class:`~mha_ref.tutorial.real_models.layers.RMSNorm` of the model.
        scale: ``(batch, seq_len, 1)`` float32, broadcastable to its input.

    Raises:
        ValueError: if ``scale`` does not broadcast to the input (when the norm runs).

    Source:
        The RMS norm of Zhang and Sennrich 2019, arXiv:1910.07467, eq. 4, with its denominator
        held at the value of another run (an intervention of this module's).
    """

    def hook(module: nn.Module, args, output):  # args[0]: (batch, seq_len, dim)
        x = args[0]
        try:
            scaled = x.float() * scale  # (batch, seq_len, dim)
        except RuntimeError as error:
            raise ValueError(
                f"scale of shape {tuple(scale.shape)} does not fit the norm's input "
                f"{tuple(x.shape)}; record it with inverse_rms on the same tokens."
            ) from error
        return module.weight * scaled.to(x.dtype)  # (batch, seq_len, dim)

    handle = norm.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def shared_keys_analysis() -> dict:
    """Example 26's measurements of shared key/value heads (cached by both files' SHA-256 and
    the arguments).

    Returns:
        dict: ``{"gemma3": ..., "smollm2": ...}``, each a list with one dict per entry of
        :data:`BLOCKS`: ``"layer"``, ``"kv_head"``, ``"heads"`` (the query heads that read it),
        ``"scores"`` ``(len(heads),)`` their induction scores, and the copy losses, each
        ``(seeds,)`` nats per token: ``"first"`` (the tokens' first occurrence), ``"clean"``,
        ``"single"`` (one per query head, ablated alone), ``"group"`` (all of them),
        ``"values_zeroed"``; Gemma's also ``"single_frozen"``, each query head ablated alone with
        the block's post-attention norm held at its clean scale (with the whole group ablated
        the norm's input is 0 and its output 0 either way).

    Raises:
        ModelFileError, ModuleNotFoundError: as
            :func:`~mha_ref.tutorial.real_models.gemma3.load_gemma3` (not when cached).
    """
    arguments = {
        "model": MODEL_FILE_SHA256, "smollm2": SMOLLM2_SHA256, "blocks": BLOCKS,
        "distance": DISTANCES[0], "copy_len": COPY_LEN, "seeds": list(SEEDS),
        "ids": list(GEMMA3_ORDINARY_IDS), "smollm2_ids": list(SMOLLM2_ORDINARY_IDS),
        "smollm2_first": SMOLLM2_FIRST_ID,
    }  # fmt: skip
    return cached("shared_keys", arguments, _in_threads)


def _in_threads() -> dict:
    with model_threads():
        gemma, smollm2 = load_gemma3("cpu"), load_smollm2("cpu")
        return {"gemma3": _measure(gemma, "gemma3"), "smollm2": _measure(smollm2, "smollm2")}


def _measure(model, name: str) -> list[dict]:
    """Every measurement of :func:`shared_keys_analysis` for one model."""
    distance = DISTANCES[0]
    if name == "gemma3":
        first_id, ids = int(model.tokenizer.encode("")[0]), GEMMA3_ORDINARY_IDS  # <bos>
    else:
        first_id, ids = SMOLLM2_FIRST_ID, SMOLLM2_ORDINARY_IDS
    tokens = copy_after_gap(distance, COPY_LEN, SEEDS, first_id, ids)  # (seeds, L)
    clean = _clean_pass(model, tokens, distance)
    group_size = model.config.num_heads // model.config.num_kv_heads
    found = []
    for layer, kv_head in BLOCKS[name]:
        heads = [(layer, kv_head * group_size + i) for i in range(group_size)]
        stream = clean["streams"][layer]  # (seeds, L, embed_dim) entering the block

        def losses(ablated, stream=stream, layer=layer) -> torch.Tensor:
            return _copy_losses(model, stream, layer, tokens, distance, ablated)  # (seeds,)

        with zeroed_values(model, layer, [kv_head]):
            values_zeroed = losses([])
        result = {
            "layer": layer, "kv_head": kv_head, "heads": heads,
            "scores": clean["scores"][layer, [h for _, h in heads]],
            "first": clean["first_losses"], "clean": clean["losses"],
            "single": [losses([head]) for head in heads], "group": losses(heads),
            "values_zeroed": values_zeroed,
        }  # fmt: skip
        norm = getattr(model.layers[layer], "post_attention_norm", None)
        if norm is not None:  # Gemma: the attention output is normalised again
            scale = _clean_inverse_rms(model, norm, stream, layer)  # (seeds, L, 1)
            with frozen_norm_scale(norm, scale):  # (all heads ablated: the same zeros)
                result["single_frozen"] = [losses([head]) for head in heads]
        found.append(result)
    return found


def _clean_inverse_rms(model, norm: RMSNorm, stream: torch.Tensor, layer: int) -> torch.Tensor:
    """``norm``'s :func:`inverse_rms` on the clean run of block ``layer`` from ``stream``."""
    recorded = []
    handle = norm.register_forward_pre_hook(lambda module, args: recorded.append(args[0]))
    try:
        with torch.no_grad():
            model.run_layers(stream, layer, layer + 1)
    finally:
        handle.remove()
    return inverse_rms(norm, recorded[0])  # (seeds, L, 1)
