"""Gemma 3 270M's local and global layers, measured: the computations of example 25.

Gemma 3 runs five sliding-window ("local") layers to each full-attention ("global") layer. This
module measures what that design does on the real weights, each claim by a computation the
build runs:

- **memory**: the KV cache at ``seq_len`` tokens when local layers keep only their window
  (:func:`kv_cache_bytes`), against every layer global and against SmolLM2's file;
- **positions**: which rotary pairs never complete a turn within a window or a context, for the
  two RoPE bases (:func:`slow_pairs`);
- **exactness**: a local layer decoded one token at a time from a ring buffer of ``window``
  keys equals its masked attention on the whole text; a global layer given the same ring
  buffer does not (:func:`ring_buffer_attention`);
- **induction**: on a random sequence whose start comes back after ``distance`` tokens, which
  heads attend to the token after the earlier copy (:func:`induction_scores_at`), and what
  ablating them does to the loss on the copy (:func:`copy_losses_after`), against other heads
  of the same layers, within the window and beyond it.

The head tools (:func:`mha_ref.tutorial.real_models.heads.ablate_heads`,
:func:`~mha_ref.tutorial.real_models.heads.top_heads`) are SmolLM2's, unchanged: they need only
``model.layers[i].attention.out_proj``, ``model.config.num_heads`` and ``model.check_head``,
which both models have.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from contextlib import contextmanager

import torch

from mha_ref._validation import require_positive_int
from mha_ref.grouped import GroupedQueryAttention
from mha_ref.rolling_cache import RollingKVCache
from mha_ref.rope import rotary_frequencies
from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.real_models.gemma3 import ring_buffer_decode
from mha_ref.tutorial.real_models.layers import next_token_losses

__all__ = [
    "COPY_LEN",
    "DECODE_LEN",
    "DECODE_PROMPT",
    "DISTANCES",
    "GEMMA3_ORDINARY_IDS",
    "NUM_ABLATED",
    "NUM_CONTROLS",
    "SEEDS",
    "SMOLLM2_FIRST_ID",
    "SMOLLM2_ORDINARY_IDS",
    "copy_after_gap",
    "copy_losses_after",
    "decode_against_forward",
    "induction_scores_at",
    "kv_cache_bytes",
    "local_global_analysis",
    "ring_buffer_attention",
    "slow_pairs",
]

#: Gemma 3's ordinary text pieces, ids ``494 .. 255967`` (below them the control, unused and
#: byte tokens, above them runs of whitespace, image markers and unused tokens)
GEMMA3_ORDINARY_IDS = (494, 255968)
#: SmolLM2's ordinary tokens, ids ``17 .. 49151`` (below them its 17 control tokens)
SMOLLM2_ORDINARY_IDS = (17, 49152)
#: the token put first in SmolLM2's sequences, ``<|endoftext|>`` (its tokenizer puts no token
#: first; a first token of its own gives both models' sequences the same shape)
SMOLLM2_FIRST_ID = 0
#: example 25's two distances between a token and its earlier copy, inside the 512-key window
#: of a local layer and beyond it
DISTANCES = (100, 520)
#: tokens repeated after ``distance`` (the copy whose loss is measured)
COPY_LEN = 30
#: the random sequences' seeds (one sequence each)
SEEDS = (0, 1, 2)
#: heads ablated together (the top induction heads, and each control set)
NUM_ABLATED = 3
#: control sets of other heads, as many in each layer as the ablated set has
#: (:func:`~mha_ref.tutorial.real_models.heads.matched_controls`, seed 0)
NUM_CONTROLS = 3
#: tokens the whole-model check decodes at once (a prompt) before it goes one token at a time
DECODE_PROMPT = 510
#: tokens the whole-model check decodes in all, past the local window of 512
DECODE_LEN = 530


# ------------------------------------------------------------------------------------------------
# memory and positions, from the two files' sizes
# ------------------------------------------------------------------------------------------------


def kv_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    seq_len: int,
    local_layers: int = 0,
    window: int | None = None,
    bytes_per_number: int = 2,
) -> int:
    """Bytes of a KV cache holding ``seq_len`` tokens of one sequence.

    Math: a global layer keeps ``seq_len`` keys and values, a local layer only
    ``min(seq_len, window)``; each is ``num_kv_heads * head_dim`` numbers. So the cache is
    ``2 * num_kv_heads * head_dim * bytes_per_number * (global_layers * seq_len +
    local_layers * min(seq_len, window))``.

    Args:
        num_layers: attention layers, local ones included.
        num_kv_heads: key/value heads per layer.
        head_dim: features per head.
        seq_len: tokens held.
        local_layers: how many of the layers are local. Default: 0 (every layer global).
        window: a local layer's keys; required when ``local_layers > 0``.
        bytes_per_number: 2 for bfloat16 or float16 (the default), 4 for float32.

    Returns:
        int: bytes.

    Raises:
        ValueError: if a size is not a positive int, ``local_layers`` is negative or above
            ``num_layers``, or local layers come without a positive ``window``.

    Source:
        Beltagy et al. 2020, arXiv:2004.05150, Sec. 3.1 (the window); Gemma Team 2025,
        arXiv:2503.19786, Sec. 2 (5 local : 1 global, to reduce the KV-cache memory).
    """
    for name, value in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads),
                        ("head_dim", head_dim), ("seq_len", seq_len),
                        ("bytes_per_number", bytes_per_number)):
        require_positive_int(name, value)
    if not isinstance(local_layers, int) or not 0 <= local_layers <= num_layers:
        raise ValueError(
            f"local_layers must be an int from 0 to num_layers={num_layers}, got "
            f"{local_layers!r}."
        )
    if local_layers and (not isinstance(window, int) or window < 1):
        raise ValueError(
            f"local layers need window, the keys each one keeps (a positive int), got "
            f"window={window!r}; Gemma 3's is 512."
        )
    kept = (num_layers - local_layers) * seq_len
    if local_layers:
        kept += local_layers * min(seq_len, window)
    return 2 * num_kv_heads * head_dim * bytes_per_number * kept


def slow_pairs(head_dim: int, base: float, seq_len: int) -> int:
    """Rotary pairs that do not complete one turn in ``seq_len`` positions.

    Math: pair ``i`` turns by :math:`\\theta_i = b^{-2i/d}` radians per position, a full turn
    every :math:`2\\pi / \\theta_i` positions; the pairs counted have
    :math:`2\\pi / \\theta_i > \\text{seq\\_len}`: over the whole span their angle changes by
    less than one turn, so they never repeat a relative position's angle.

    Args:
        head_dim: features per head (all rotated, as in both models).
        base: the rotary base.
        seq_len: positions, e.g. a local layer's window or the context length.

    Returns:
        int: the number of such pairs, out of ``head_dim // 2``.

    Raises:
        TypeError, ValueError: as :func:`mha_ref.rotary_frequencies`, or if ``seq_len`` is
            not a positive int.

    Source:
        Su et al. 2021, arXiv:2104.09864, eq. 15.
    """
    require_positive_int("seq_len", seq_len, "positions")
    periods = 2 * torch.pi / rotary_frequencies(head_dim, base)  # (head_dim // 2,) positions
    return int((periods > seq_len).sum())


# ------------------------------------------------------------------------------------------------
# a window decoded from a ring buffer
# ------------------------------------------------------------------------------------------------


def ring_buffer_attention(attention: GroupedQueryAttention, x: torch.Tensor, window: int):
    """One attention layer decoded token by token, its keys and values in a ring buffer.

    Token ``t`` is projected, its query and key normalised (QK-norm, when the layer has it) and
    rotated at position ``t``, its key and value written into a
    :class:`mha_ref.RollingKVCache` of ``window`` slots (over the token ``window`` steps
    back), and its query attends, with no mask, to what the buffer holds. For a layer trained
    with that window this equals ``attention(x, attn_mask=sliding_window_mask(...))``; for a
    global layer it drops every key older than ``window``.

    Args:
        attention: a layer with ``rope`` (a loaded model's ``block.attention``).
        x: ``(1, seq_len, embed_dim)``, the layer's input (after the block's first norm).
        window: slots of the buffer.

    Returns:
        torch.Tensor: ``(1, seq_len, embed_dim)``, the layer's output.

    Raises:
        ValueError: if ``x`` is not one sequence, or ``window`` is not a positive int.

    Source:
        Jiang et al. 2023, arXiv:2310.06825, Sec. 2 (rolling buffer cache); the steps of
        :meth:`mha_ref.GroupedQueryAttention.forward`, one token at a time
        (:func:`~mha_ref.tutorial.real_models.gemma3.ring_buffer_decode`, as Gemma 3's cached
        decoding does).
    """
    require_positive_int("window", window, "slots of the ring buffer")
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[0] != 1:
        raise ValueError(
            f"x must be one sequence, shape (1, seq_len, embed_dim), got "
            f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}."
        )
    cache = RollingKVCache(1, attention.num_kv_heads, window, attention.head_dim,
                           device=x.device, dtype=x.dtype)
    steps = [ring_buffer_decode(attention, x[:, t : t + 1], cache) for t in range(x.shape[1])]
    return torch.cat(steps, dim=1)  # (1, seq_len, embed_dim), one token at a time


def decode_against_forward(
    model, tokens: torch.Tensor, prompt_len: int, rings_everywhere: bool = False
) -> tuple[torch.Tensor, float]:
    """The whole model decoded with caches, against its forward pass, position by position.

    The first ``prompt_len`` tokens are decoded at once (a prompt), the others one at a time,
    with :meth:`~mha_ref.tutorial.real_models.gemma3.Gemma3.new_caches`' caches (a ring buffer
    of ``sliding_window`` keys in each local block, a full cache in each global one) or, with
    ``rings_everywhere``, a ring buffer in every block.

    Args:
        model: a loaded ``Gemma3``.
        tokens: ``(1, seq_len)`` ids.
        prompt_len: tokens decoded at once, ``1 .. seq_len - 1``.
        rings_everywhere: give the global blocks ring buffers too.

    Returns:
        tuple[torch.Tensor, float]: ``(seq_len - prompt_len + 1,)`` float32, the largest
        ``|decoded - forward|`` of the logits at positions ``prompt_len - 1 .. seq_len - 1``,
        one per position; and the largest ``|forward|`` of those logits.

    Raises:
        ValueError: if ``tokens`` is not one sequence, or ``prompt_len`` is out of range.
    """
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.shape[0] != 1:
        raise ValueError(
            f"tokens must be one sequence, shape (1, seq_len), got "
            f"{tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__}."
        )
    seq_len = tokens.shape[1]
    if isinstance(prompt_len, bool) or not isinstance(prompt_len, int) or not (
        1 <= prompt_len < seq_len
    ):
        raise ValueError(
            f"prompt_len must be an int from 1 to {seq_len - 1} (seq_len - 1), got {prompt_len!r}."
        )
    config = model.config
    caches = model.new_caches(1, seq_len)
    if rings_everywhere:
        caches = [RollingKVCache(1, config.num_kv_heads, config.sliding_window, config.head_dim)
                  for _ in caches]  # fmt: skip
    last = torch.tensor([-1])  # (1,)
    with torch.no_grad():
        expected, _ = model(tokens, logits_at=torch.arange(prompt_len - 1, seq_len))  # (1, n, V)
        steps = [model.decode(tokens[:, :prompt_len], caches, logits_at=last)]  # (1, 1, V)
        for position in range(prompt_len, seq_len):
            steps.append(model.decode(tokens[:, position : position + 1], caches))  # (1, 1, V)
    decoded = torch.cat(steps, dim=1)  # (1, n, vocab_size)
    differences = (decoded - expected).abs().amax(dim=-1)[0]  # (n,)
    return differences, float(expected.abs().max())


# ------------------------------------------------------------------------------------------------
# induction within and beyond a window
# ------------------------------------------------------------------------------------------------


def copy_after_gap(
    distance: int, copy_len: int, seeds: Sequence[int], bos_id: int, ids: tuple[int, int]
) -> torch.Tensor:
    """Random sequences whose first ``copy_len`` tokens come back ``distance`` tokens later.

    Each row is ``<bos>``, then ``distance`` random tokens, then the first ``copy_len`` of them
    again: token ``1 + distance + i`` equals token ``1 + i``. Only an earlier copy predicts the
    repeated tokens, and a layer whose window is shorter than ``distance`` cannot see it.

    Args:
        distance: tokens from a token to its copy; at least ``copy_len``.
        copy_len: tokens repeated, at least 2.
        seeds: one ``torch.Generator`` seed per row.
        bos_id: the id put first.
        ids: ``(low, high)``: tokens are drawn uniformly from ``low .. high - 1``.

    Returns:
        torch.Tensor: ``(len(seeds), 1 + distance + copy_len)``, ``torch.long``.

    Raises:
        ValueError: if ``copy_len < 2``, ``distance < copy_len`` or ``seeds`` is empty.

    Source:
        Olsson et al. 2022, arXiv:2209.11895, Sec. 2 (repeated random tokens).
    """
    require_positive_int("distance", distance, "tokens between a token and its copy")
    if not isinstance(copy_len, int) or not 2 <= copy_len <= distance or not seeds:
        raise ValueError(
            f"need 2 <= copy_len <= distance and at least one seed, got copy_len={copy_len!r}, "
            f"distance={distance}, seeds={list(seeds)}."
        )
    rows = []
    for seed in seeds:
        generator = torch.Generator().manual_seed(seed)
        first = torch.randint(ids[0], ids[1], (distance,), generator=generator)  # (distance,)
        rows.append(torch.cat([torch.tensor([bos_id]), first, first[:copy_len]]))
    return torch.stack(rows)  # (len(seeds), 1 + distance + copy_len)


def induction_scores_at(weights: torch.Tensor, distance: int, copy_len: int) -> torch.Tensor:
    """Each head's mean weight on the token after the earlier copy, over the repeated tokens.

    Query ``q = 1 + distance + i`` (``i = 0 .. copy_len - 2``) holds a token last seen at
    ``q - distance``; an induction head attends to the token after it, ``q - distance + 1``.

    Args:
        weights: ``(batch, num_heads, seq_len, seq_len)`` attention weights of one layer on
            :func:`copy_after_gap`'s sequences.
        distance, copy_len: those sequences' arguments.

    Returns:
        torch.Tensor: ``(num_heads,)``, in ``[0, 1]``, averaged over the batch.

    Raises:
        ValueError: if ``weights`` is not ``(batch, heads, L, L)`` with
            ``L = 1 + distance + copy_len``.

    Source:
        Olsson et al. 2022, arXiv:2209.11895, Sec. 2 (prefix matching).
    """
    seq_len = 1 + distance + copy_len
    if weights.dim() != 4 or weights.shape[-2:] != (seq_len, seq_len):
        raise ValueError(
            f"weights must be (batch, num_heads, {seq_len}, {seq_len}) for distance={distance}"
            f" and copy_len={copy_len}, got {tuple(weights.shape)}."
        )
    queries = torch.arange(1 + distance, distance + copy_len)  # (copy_len - 1,)
    keys = queries - distance + 1  # (copy_len - 1,)
    return weights[:, :, queries, keys].mean(dim=(0, 2))  # (num_heads,)


def copy_losses_after(model, tokens: torch.Tensor, distance: int,
                      heads: Iterable[tuple[int, int]] = ()) -> torch.Tensor:
    """Each sequence's mean loss on its repeated tokens, with ``heads`` zero-ablated.

    The first repeated token is left out (nothing before it predicts it); the logits are made
    only at the copy's positions (Gemma's 262,144-word unembedding costs more than its blocks).

    Args:
        model: a loaded model (``Gemma3`` or ``SmolLM2``).
        tokens: ``(batch, seq_len)`` from :func:`copy_after_gap`.
        distance: their ``distance``.
        heads: ``(layer, head)`` pairs ablated
            (:func:`mha_ref.tutorial.real_models.heads.ablate_heads`).

    Returns:
        torch.Tensor: ``(batch,)`` nats per token.

    Raises:
        TypeError, ValueError: as :func:`~mha_ref.tutorial.real_models.heads.ablate_heads`.
    """
    return _copy_losses(model, model.embed(tokens), 0, tokens, distance, heads)


def _copy_losses(model, stream: torch.Tensor, start: int, tokens: torch.Tensor, distance: int,
                 heads: Iterable[tuple[int, int]] = ()) -> torch.Tensor:
    """:func:`copy_losses_after` from ``stream``, the clean residual entering block ``start``
    (no ablated head may sit before it): the blocks before are not run again."""
    from mha_ref.tutorial.real_models.heads import ablate_heads

    with torch.no_grad(), ablate_heads(model, heads):
        residual, _ = model.run_layers(stream, start)  # (batch, seq_len, embed_dim)
        logits = model.unembed(residual[:, 1 + distance :])  # (batch, copy_len, vocab)
    copy = tokens[:, 1 + distance :]  # (batch, copy_len)
    return next_token_losses(logits, copy).mean(dim=1)  # (batch,) over copy_len - 1 predictions


# ------------------------------------------------------------------------------------------------
# example 25's measurements, cached
# ------------------------------------------------------------------------------------------------


def local_global_analysis() -> dict:
    """Example 25's measurements on Gemma 3 270M (cached by the file's SHA-256 and arguments).

    Returns:
        dict: ``"configs"`` ``{"gemma3": ..., "smollm2": ...}``, each model's sizes as a
        dict (:class:`~mha_ref.tutorial.real_models.gemma3.Gemma3Config`,
        :class:`~mha_ref.tutorial.real_models.smollm2.SmolLM2Config`); ``"scores"`` and
        ``"previous"``, ``{distance: (num_layers, num_heads)}`` induction and previous-token
        scores; the heads ablated: ``"top"`` (the :data:`NUM_ABLATED` heads of highest
        induction score at the first distance), ``"top_local"`` (the same among local
        layers), ``"previous_local"`` (the local heads of highest previous-token score),
        ``"controls"`` and ``"previous_controls"`` (other heads of the layers of ``"top"``
        and of ``"previous_local"``, :data:`NUM_CONTROLS` sets each);
        ``"losses"`` ``{distance: {name: (seeds,)}}``, copy losses with nothing ablated
        (``"clean"``), with each set above ablated, with each top head alone (``"single"``,
        first distance), with the global layers limited to the local window
        (``"windowed_global"``, second distance), and on the same tokens at their first
        occurrence (``"first"``); ``"ring"`` ``{layer: (max |ring - masked|, max
        |masked|)}`` for the last local layer before the first global one and for that
        global layer, on the first sequence at the longer distance; ``"decode"``
        ``{"served", "rings": (differences, scale)}``, :func:`decode_against_forward` on that
        sequence's first :data:`DECODE_LEN` tokens, :data:`DECODE_PROMPT` of them at once, with
        the model's caches and with ring buffers in every block; ``"smollm2"``, SmolLM2 on
        the same protocol at the first distance (its sequences begin with
        :data:`SMOLLM2_FIRST_ID` and draw from :data:`SMOLLM2_ORDINARY_IDS`): ``"scores"``
        ``(num_layers, num_heads)``, ``"top"``, ``"controls"`` and ``"losses"`` ``{"first",
        "clean", "top": (seeds,), "controls": [(seeds,), ...]}``.

    Raises:
        ModelFileError, ModuleNotFoundError: as
            :func:`~mha_ref.tutorial.real_models.gemma3.load_gemma3` (not when cached).
    """
    from mha_ref.tutorial.real_models.gemma3 import MODEL_FILE_SHA256
    from mha_ref.tutorial.real_models.smollm2 import MODEL_FILE_SHA256 as SMOLLM2_SHA256

    arguments = {
        "model": MODEL_FILE_SHA256, "smollm2": SMOLLM2_SHA256, "distances": list(DISTANCES),
        "copy_len": COPY_LEN, "seeds": list(SEEDS), "ablated": NUM_ABLATED,
        "controls": NUM_CONTROLS, "ids": list(GEMMA3_ORDINARY_IDS),
        "smollm2_ids": list(SMOLLM2_ORDINARY_IDS), "smollm2_first": SMOLLM2_FIRST_ID,
    }
    return cached("gemma3_local_global", arguments, _in_threads)


def _in_threads() -> dict:
    from mha_ref.tutorial.real_models.loading import model_threads

    with model_threads():
        return _local_global()


def _local_global() -> dict:
    from mha_ref.tutorial.real_models.gemma3 import load_gemma3
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2

    model = load_gemma3("cpu")
    config = model.config
    bos_id = int(model.tokenizer.encode("")[0])
    inputs = {d: copy_after_gap(d, COPY_LEN, SEEDS, bos_id, GEMMA3_ORDINARY_IDS)
              for d in DISTANCES}  # each (seeds, 1 + d + COPY_LEN)
    global_layer = config.global_layers[0]
    watched = (global_layer - 1, global_layer)  # a local layer and the global one after it
    with _recording_attention(model, watched) as recorded:
        clean = {d: _clean_pass(model, tokens, d) for d, tokens in inputs.items()}
    ring = {}  # recorded on the last (longest) distance's batch: its first sequence
    for layer in watched:
        x, masked = recorded[layer]  # (seeds, L, embed_dim) each
        with torch.no_grad():
            decoded = ring_buffer_attention(model.layers[layer].attention, x[:1],
                                            config.sliding_window)  # (1, L, embed_dim)
        ring[layer] = (float((decoded - masked[:1]).abs().max()), float(masked[:1].abs().max()))
    longest = inputs[DISTANCES[-1]][:1, :DECODE_LEN]  # (1, DECODE_LEN): the sequence ring reads
    decode = {kind: decode_against_forward(model, longest, DECODE_PROMPT, kind == "rings")
              for kind in ("served", "rings")}  # fmt: skip
    scores = {d: pass_["scores"] for d, pass_ in clean.items()}
    previous = {d: pass_["previous"] for d, pass_ in clean.items()}
    heads = _chosen_heads(scores[DISTANCES[0]], previous[DISTANCES[0]], config)
    losses = {d: _ablations(model, inputs[d], d, clean[d], heads, controls=d == DISTANCES[0])
              for d in DISTANCES}
    configs = {
        "gemma3": {**dataclasses.asdict(config), "global_layers": list(config.global_layers)},
        "smollm2": dataclasses.asdict(load_smollm2("cpu").config),
    }
    return {"configs": configs, "scores": scores, "previous": previous, **heads,
            "losses": losses, "ring": ring, "decode": decode, "inputs": inputs,
            "smollm2": _smollm2_induction(load_smollm2("cpu"))}


def _smollm2_induction(model) -> dict:
    """SmolLM2 on the same protocol at the first distance: its induction scores, its top
    heads and control sets of other heads of their layers, and the copy losses with each
    set ablated, with nothing ablated, and on the tokens' first occurrence."""
    from mha_ref.tutorial.real_models.heads import matched_controls, top_heads

    distance = DISTANCES[0]
    tokens = copy_after_gap(distance, COPY_LEN, SEEDS, SMOLLM2_FIRST_ID, SMOLLM2_ORDINARY_IDS)
    clean = _clean_pass(model, tokens, distance)  # tokens: (seeds, 1 + distance + COPY_LEN)
    top = top_heads(clean["scores"], NUM_ABLATED)
    controls = matched_controls(top, model.config.num_heads, top, NUM_CONTROLS, seed=0)

    def losses(ablated) -> torch.Tensor:
        start = min(layer for layer, _ in ablated)  # the blocks before it are unchanged
        return _copy_losses(model, clean["streams"][start], start, tokens, distance, ablated)

    return {
        "scores": clean["scores"],  # (num_layers, num_heads)
        "top": top,
        "controls": controls,
        "losses": {"first": clean["first_losses"], "clean": clean["losses"], "top": losses(top),
                   "controls": [losses(c) for c in controls]},  # each (seeds,)
    }


@contextmanager
def _recording_attention(model, layers: Sequence[int]):
    """Inside the block, ``recorded[layer]`` is the last ``(input, output)`` of that layer's
    attention, each ``(batch, seq_len, embed_dim)``."""
    recorded: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def make(layer: int):
        def hook(module, args, output):
            recorded[layer] = (args[0], output[0])

        return hook

    handles = [model.layers[layer].attention.register_forward_hook(make(layer))
               for layer in layers]
    try:
        yield recorded
    finally:
        for handle in handles:
            handle.remove()


def _clean_pass(model, tokens: torch.Tensor, distance: int) -> dict:
    """One pass with weights: the induction scores, the copy losses, and the stream entering
    each block (an ablation reruns only the blocks from its first ablated one)."""
    streams = []
    with torch.no_grad():
        residual, weights = model.embed(tokens), []  # (seeds, L, embed_dim)
        for block in model.layers:
            streams.append(residual)
            residual, block_weights = block(residual, need_weights=True)
            weights.append(block_weights)  # (seeds, num_heads, L, L)
        logits = model.unembed(residual[:, 1 + distance :])  # (seeds, COPY_LEN, vocab_size)
        first_logits = model.unembed(residual[:, 1 : 1 + COPY_LEN])  # the same tokens, first seen
    first = next_token_losses(first_logits, tokens[:, 1 : 1 + COPY_LEN])  # (seeds, COPY_LEN - 1)
    return {
        "scores": torch.stack([induction_scores_at(w, distance, COPY_LEN) for w in weights]),
        "previous": torch.stack([_previous_token_scores(w) for w in weights]),
        "losses": next_token_losses(logits, tokens[:, 1 + distance :]).mean(dim=1),  # (seeds,)
        "first_losses": first.mean(dim=1),  # (seeds,) nothing earlier to copy from
        "streams": streams,
    }


def _previous_token_scores(weights: torch.Tensor) -> torch.Tensor:
    """Each head's mean weight on the token just before the query, ``(num_heads,)``; queries
    from position 2, so that no query's previous token is ``<bos>``."""
    queries = torch.arange(2, weights.shape[-1])  # (L - 2,)
    return weights[:, :, queries, queries - 1].mean(dim=(0, 2))  # (num_heads,)


def _chosen_heads(scores: torch.Tensor, previous: torch.Tensor, config) -> dict:
    """The top induction heads, the top induction heads and the top previous-token heads of
    the local layers, and control sets of other heads of the top heads' layers (drawn with
    seed 0); ``scores`` and ``previous`` are ``(num_layers, num_heads)``."""
    from mha_ref.tutorial.real_models.heads import matched_controls, top_heads

    top = top_heads(scores, NUM_ABLATED)
    local_only = scores.clone()
    local_only[list(config.global_layers)] = -1.0  # no global head can be chosen
    previous_local = previous.clone()
    previous_local[list(config.global_layers)] = -1.0
    previous_top = top_heads(previous_local, NUM_ABLATED)
    return {"top": top, "top_local": top_heads(local_only, NUM_ABLATED),
            "controls": matched_controls(top, config.num_heads, top, NUM_CONTROLS, seed=0),
            "previous_local": previous_top,
            "previous_controls": matched_controls(previous_top, config.num_heads, previous_top,
                                                  NUM_CONTROLS, seed=0)}


def _windowed_global_losses(model, tokens, distance: int, clean: dict) -> torch.Tensor:
    """Copy losses with every global block given the local blocks' window (no head removed)."""
    config = model.config
    start = config.global_layers[0]  # the blocks before it are unchanged
    try:
        for layer in config.global_layers:
            model.layers[layer].sliding_window = config.sliding_window
        return _copy_losses(model, clean["streams"][start], start, tokens, distance)
    finally:
        for layer in config.global_layers:
            model.layers[layer].sliding_window = None


def _ablations(model, tokens, distance: int, clean: dict, heads: dict, controls: bool) -> dict:
    """Copy losses with no head, the top heads and (with ``controls``) the control sets
    ablated."""
    def losses(ablated) -> torch.Tensor:
        start = min(layer for layer, _ in ablated)  # the blocks before it are unchanged
        return _copy_losses(model, clean["streams"][start], start, tokens, distance, ablated)

    result = {"first": clean["first_losses"], "clean": clean["losses"], "top": losses(heads["top"]),
              "previous_local": losses(heads["previous_local"])}
    if not controls:  # the longer distance: the global blocks limited to the local window
        result["windowed_global"] = _windowed_global_losses(model, tokens, distance, clean)
    else:
        result["single"] = [losses([head]) for head in heads["top"]]
        result["top_local"] = losses(heads["top_local"])
        result["controls"] = [losses(c) for c in heads["controls"]]
        result["previous_controls"] = [losses(c) for c in heads["previous_controls"]]
    return result
