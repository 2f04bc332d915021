r"""What each head of a real model does: pattern scores, ablation, attribution patching.

**Scores** (one forward pass with ``need_weights=True``; every score is a mean attention weight,
so it lies in ``[0, 1]``): on a sequence of ``n`` random tokens repeated twice,

* *previous-token*: the weight from token ``i`` on token ``i - 1``;
* *induction*: from a token ``i`` of the second copy on the token **after** its first
  occurrence, ``i - n + 1`` (Olsson et al. 2022, arXiv:2209.11895, Sec. 2 "prefix matching");
* *duplicate-token*: from ``i`` of the second copy on its first occurrence, ``i - n``;
* *first-token* (sink): from every token ``i >= 1`` on token 0 (Xiao et al. 2023,
  arXiv:2309.17453, Sec. 3.1).

**Ablation** (:func:`ablate_heads`): a head's output, the ``head_dim`` features it puts into
its block's output projection ``out_proj``, is replaced by zeros or by its mean over a reference
text, with a forward pre-hook on ``out_proj`` that a ``with`` block adds and removes. Nothing in
the model is patched otherwise (Michel et al. 2019, "Are Sixteen Heads Really Better than One?",
arXiv:1905.10650, Sec. 2, mask heads this way).

**Attribution patching** (:func:`attribution_effects`): the first-order estimate of every
head's ablation effect from one backward pass,
:math:`\Delta L \approx \sum_{t,f} \partial L / \partial z_{t,f}\,(z'_{t,f} - z_{t,f})`, with
``z`` the head's output and ``z'`` its replacement; compared with the exact effect, one head at a
time (:func:`exact_effects`).

**One set of tools for every model.** They are written once, against what both
:class:`~mha_ref.tutorial.real_models.smollm2.SmolLM2` and
:class:`~mha_ref.tutorial.real_models.gemma3.Gemma3` have from
:class:`~mha_ref.tutorial.real_models.layers.DecoderStack`: ``model.config`` (``num_layers``,
``num_heads``, ``head_dim``, ``embed_dim``, ``vocab_size``), ``model.layers[i].attention.out_proj``
(whose input is every query head's output side by side), ``model.check_head``, the stages
``embed``, ``run_layers`` and ``unembed``, ``stream_token_losses``, and a forward pass that returns
``(logits, weights)`` with ``need_weights=True``. A head is a *query* head: where key/value heads
are shared (SmolLM2's 3 for 9 query heads, Gemma 3's one for 4), ablating query head ``h`` removes
what ``h`` wrote, and the other heads of its group still read the same keys and values.

Written once is not measured alike. On Gemma 3: a sequence without ``<bos>`` first is far from
what the model was trained on, and the repeated-sequence tools here take two exact copies with
nothing before them (example 25 builds Gemma's inputs with ``<bos>`` first and scores them with
:mod:`~mha_ref.tutorial.real_models.local_global`); Gemma normalises the attention's output
after the projection, so zeroing one head also rescales what the other heads of its block add
(in SmolLM2 they are unchanged); and attribution patching, a first-order estimate, can be far
from the exact effect there: compare it with :func:`exact_effects` before trusting it.

Layers and heads are numbered from 0. :func:`random_repeated_tokens` leaves out SmolLM2's 17
control tokens (ids 0 to 16) by default.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from contextlib import contextmanager

import torch

from mha_ref._validation import require_positive_int

__all__ = [
    "ABLATION_MODES",
    "ablate_heads",
    "ablated_token_losses",
    "attribution_effects",
    "benjamini_hochberg",
    "clean_streams",
    "copy_losses",
    "exact_effects",
    "first_token_scores",
    "head_means",
    "head_outputs",
    "head_scores",
    "matched_controls",
    "equal_groupings",
    "group_similarities",
    "grouping_gaps",
    "pattern_similarity",
    "induction_scores",
    "duplicate_token_scores",
    "pearson",
    "plot_every_head",
    "plot_score_maps",
    "previous_token_scores",
    "random_repeated_tokens",
    "scale_heads",
    "top_heads",
    "top_k_overlap",
]

#: what :func:`ablate_heads` puts in place of a head's output
ABLATION_MODES = ("zero", "mean")
#: the ids of SmolLM2's control tokens are 0 .. 16; random tokens start above them
_FIRST_ORDINARY_ID = 17


# ------------------------------------------------------------------------------------------------
# inputs
# ------------------------------------------------------------------------------------------------


def random_repeated_tokens(
    half_len: int, batch: int = 1, seed: int = 0, vocab_size: int = 49152
) -> torch.Tensor:
    """``batch`` sequences of ``half_len`` random tokens, each repeated twice.

    Args:
        half_len: tokens in one copy, ``n``.
        batch: sequences.
        seed: seed of the ``torch.Generator`` that draws them.
        vocab_size: ids are drawn uniformly from ``17 .. vocab_size - 1`` (no control token).

    Returns:
        torch.Tensor: ``(batch, 2 * half_len)``, ``torch.long``; ``x[:, n + i] == x[:, i]``.

    Raises:
        ValueError: if ``half_len < 2``, ``batch < 1`` or ``vocab_size <= 17`` (no ordinary
            token to draw).
    """
    if half_len < 2 or batch < 1:
        raise ValueError(
            f"need half_len >= 2 and batch >= 1, got half_len={half_len}, batch={batch}."
        )
    if vocab_size <= _FIRST_ORDINARY_ID:
        raise ValueError(
            f"vocab_size must be above {_FIRST_ORDINARY_ID} (ids 0 .. {_FIRST_ORDINARY_ID - 1} "
            f"are control tokens), got vocab_size={vocab_size}; the model's is 49152."
        )
    generator = torch.Generator().manual_seed(seed)
    half = torch.randint(_FIRST_ORDINARY_ID, vocab_size, (batch, half_len), generator=generator)
    return torch.cat([half, half], dim=1)  # (batch, 2 * half_len)


# ------------------------------------------------------------------------------------------------
# scores from attention weights
# ------------------------------------------------------------------------------------------------


def _require_repeated_weights(weights: torch.Tensor, half_len: int) -> None:
    """Raise unless ``half_len`` is a positive int and ``weights`` is ``(batch, heads,
    2 * half_len, 2 * half_len)``."""
    require_positive_int("half_len", half_len, "tokens in one copy of the repeated sequence")
    expected = 2 * half_len
    if weights.dim() != 4 or weights.shape[-2:] != (expected, expected):
        raise ValueError(
            f"weights must be (batch, num_heads, 2 * half_len, 2 * half_len) = (..., {expected}, "
            f"{expected}) for half_len={half_len}, got shape {tuple(weights.shape)}; pass the "
            f"weights of a sequence of two copies of half_len tokens (random_repeated_tokens)."
        )


def _diagonal_mean(weights: torch.Tensor, offset: int, start: int) -> torch.Tensor:
    """Mean of ``weights[..., i, i - offset]`` over queries ``i >= start``; ``(..., heads)``."""
    seq_len = weights.shape[-1]
    queries = torch.arange(start, seq_len)  # (m,)
    picked = weights[..., queries, queries - offset]  # (batch, heads, m)
    return picked.mean(dim=-1).mean(dim=0)  # (heads,)


def previous_token_scores(weights: torch.Tensor) -> torch.Tensor:
    """Mean weight from each token on the one before it.

    Args:
        weights: ``(batch, num_heads, seq_len, seq_len)`` of one block.

    Returns:
        torch.Tensor: ``(num_heads,)``, mean over queries ``1 .. seq_len - 1`` and the batch.
    """
    return _diagonal_mean(weights, offset=1, start=1)


def induction_scores(weights: torch.Tensor, half_len: int) -> torch.Tensor:
    """Mean weight from each token of the second copy on the token after its first occurrence.

    Args:
        weights: ``(batch, num_heads, 2 * half_len, 2 * half_len)`` on a repeated sequence
            (:func:`random_repeated_tokens`).
        half_len: tokens in one copy.

    Returns:
        torch.Tensor: ``(num_heads,)``; query ``i`` in ``n .. 2n - 1``, key ``i - n + 1``.

    Raises:
        TypeError: if ``half_len`` is not an int (a bool or a float is refused).
        ValueError: if ``half_len`` is below 1, or ``weights`` is not
            ``(batch, num_heads, 2 * half_len, 2 * half_len)``.

    Source:
        Olsson et al. 2022, arXiv:2209.11895, Sec. 2 (prefix matching).
    """
    _require_repeated_weights(weights, half_len)
    return _diagonal_mean(weights, offset=half_len - 1, start=half_len)


def duplicate_token_scores(weights: torch.Tensor, half_len: int) -> torch.Tensor:
    """Mean weight from each token of the second copy on its own first occurrence.

    Args:
        weights: ``(batch, num_heads, 2 * half_len, 2 * half_len)``.
        half_len: tokens in one copy.

    Returns:
        torch.Tensor: ``(num_heads,)``; query ``i`` in ``n .. 2n - 1``, key ``i - n``.

    Raises:
        TypeError: if ``half_len`` is not an int (a bool or a float is refused).
        ValueError: if ``half_len`` is below 1, or ``weights`` is not
            ``(batch, num_heads, 2 * half_len, 2 * half_len)``.

    Source:
        The duplicate-token heads of Wang et al. 2022, "Interpretability in the Wild",
        arXiv:2211.00593 (a token attending to its earlier occurrence); the score is the same
        diagonal mean as :func:`induction_scores`, one position earlier.
    """
    _require_repeated_weights(weights, half_len)
    return _diagonal_mean(weights, offset=half_len, start=half_len)


def first_token_scores(weights: torch.Tensor) -> torch.Tensor:
    """Mean weight from every token ``i >= 1`` on token 0 (the attention sink).

    Args:
        weights: ``(batch, num_heads, seq_len, seq_len)``.

    Returns:
        torch.Tensor: ``(num_heads,)``.

    Source:
        Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks",
        arXiv:2309.17453, Sec. 3.1.
    """
    return weights[..., 1:, 0].mean(dim=-1).mean(dim=0)  # (heads,)


def head_scores(model, repeated: torch.Tensor, text: torch.Tensor) -> dict[str, torch.Tensor]:
    """All four scores of every head, from one forward pass on each input.

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``).
        repeated: ``(batch, 2n)`` from :func:`random_repeated_tokens`.
        text: ``(seq_len,)`` or ``(1, seq_len)`` ids of a real text.

    Returns:
        dict[str, torch.Tensor]: ``"previous"``, ``"induction"``, ``"duplicate"`` (on the
        repeated sequence), ``"first"`` and ``"previous_text"`` (on the text), each
        ``(num_layers, num_heads)``, float32.

    Raises:
        ValueError: if ``repeated`` is not two equal copies (``x[:, n:] == x[:, :n]``).
    """
    half_len = _check_repeated(repeated)
    with torch.no_grad():
        _, weights = model(repeated, need_weights=True)  # layers x (batch, heads, 2n, 2n)
        _, text_weights = model(text, need_weights=True)  # layers x (1, heads, L, L)
    return {
        "previous": torch.stack([previous_token_scores(w) for w in weights]),
        "induction": torch.stack([induction_scores(w, half_len) for w in weights]),
        "duplicate": torch.stack([duplicate_token_scores(w, half_len) for w in weights]),
        "first": torch.stack([first_token_scores(w) for w in text_weights]),
        "previous_text": torch.stack([previous_token_scores(w) for w in text_weights]),
    }  # each (layers, heads)


def _check_repeated(repeated: torch.Tensor) -> int:
    """``n`` of a ``(batch, 2n)`` repeated sequence; a clear error when it is not one."""
    if not isinstance(repeated, torch.Tensor) or repeated.dim() != 2 or repeated.shape[1] % 2:
        shape = tuple(repeated.shape) if isinstance(repeated, torch.Tensor) else type(repeated)
        raise ValueError(
            f"repeated must be a (batch, 2n) tensor of two equal copies, got {shape}. Use "
            f"random_repeated_tokens()."
        )
    half_len = repeated.shape[1] // 2
    if not torch.equal(repeated[:, :half_len], repeated[:, half_len:]):
        raise ValueError(
            "repeated's second half differs from its first: the induction and duplicate scores "
            "need two equal copies. Use random_repeated_tokens()."
        )
    return half_len


def top_heads(scores: torch.Tensor, k: int) -> list[tuple[int, int]]:
    """The ``k`` heads with the highest score, best first.

    Args:
        scores: ``(num_layers, num_heads)``.
        k: how many.

    Returns:
        list[tuple[int, int]]: ``(layer, head)`` pairs, 0-based.

    Raises:
        ValueError: if ``scores`` is not a 2-D tensor or ``k`` is not an int from 1 to
            ``scores.numel()``.

    Source:
        No paper: a descending sort of the flattened scores (``torch.argsort``).
    """
    if not isinstance(scores, torch.Tensor) or scores.dim() != 2:
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(
            f"top_heads: scores must be a (num_layers, num_heads) tensor, got {shape}; pass one "
            f"score of head_scores(...)."
        )
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= scores.numel():
        raise ValueError(
            f"top_heads: k must be an int from 1 to {scores.numel()} (the number of heads), got "
            f"k={k!r}."
        )
    num_heads = scores.shape[1]
    order = scores.flatten().argsort(descending=True)[:k]  # (k,)
    return [divmod(int(i), num_heads) for i in order]


def matched_controls(
    chosen: Sequence[tuple[int, int]],
    num_heads: int,
    excluded: Iterable[tuple[int, int]],
    draws: int,
    seed: int,
) -> list[list[tuple[int, int]]]:
    """Random control sets for an ablation of ``chosen``: as many heads in each block as
    ``chosen`` has there, none of them in ``excluded``.

    Ablating a control set costs what removing that many heads *of the same blocks* costs, so
    an ablation of ``chosen`` that costs more is about those heads, not about their blocks.

    Args:
        chosen: the ablated heads, ``(layer, head)`` pairs, 0-based.
        num_heads: query heads per block.
        excluded: heads never drawn (``chosen`` itself, and any others to keep out).
        draws: how many sets.
        seed: seed of the ``torch.Generator`` that draws them (one generator for all draws).

    Returns:
        list[list[tuple[int, int]]]: ``draws`` sets, each sorted; no set twice until every
        possible set has been drawn (Gemma 3's top three heads have three).

    Raises:
        ValueError: if ``draws`` is not a positive int, or a block has fewer heads outside
            ``excluded`` than ``chosen`` has there.

    Source:
        No paper: random heads of the same blocks as the baseline an ablation is compared
        with (``torch.randperm`` per block), so that the blocks ablated are the same.
    """
    require_positive_int("draws", draws, "control sets to draw")
    excluded = set(excluded)
    per_block: dict[int, int] = {}
    for layer, _ in chosen:
        per_block[layer] = per_block.get(layer, 0) + 1
    free = {layer: [h for h in range(num_heads) if (layer, h) not in excluded]
            for layer in per_block}  # fmt: skip
    for layer, count in per_block.items():
        if len(free[layer]) < count:
            raise ValueError(
                f"matched_controls: block {layer} has {len(free[layer])} heads outside excluded, "
                f"fewer than the {count} chosen there; exclude fewer heads of that block."
            )
    possible = math.prod(math.comb(len(free[layer]), n) for layer, n in per_block.items())
    generator = torch.Generator().manual_seed(seed)
    sets: list[list[tuple[int, int]]] = []
    while len(sets) < draws:
        picked = []
        for layer, count in sorted(per_block.items()):
            order = torch.randperm(len(free[layer]), generator=generator)[:count].tolist()
            picked += sorted((layer, free[layer][i]) for i in order)
        # a set drawn before is drawn again only once every possible set has been drawn
        if picked not in sets or len(sets) >= possible:
            sets.append(picked)
    return sets


# ------------------------------------------------------------------------------------------------
# ablation
# ------------------------------------------------------------------------------------------------


def _group_by_layer(model, heads: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    """``{layer: [head, ...]}``, each pair checked by ``model.check_head``."""
    by_layer: dict[int, list[int]] = {}
    for pair in heads:
        if not (isinstance(pair, Sequence) and len(pair) == 2):
            raise TypeError(
                f"heads must be (layer, head) pairs, got {pair!r}. Example: [(17, 3), (18, 6)]."
            )
        layer, head = model.check_head(*pair)
        by_layer.setdefault(layer, []).append(head)
    return by_layer


def _check_means(model, mode: str, means) -> None:
    """A clear error when ``mode="mean"`` comes without ``means`` of this model's shape."""
    c = model.config
    if mode == "mean":
        expected = (c.num_layers, c.num_heads, c.head_dim)
        if not isinstance(means, torch.Tensor) or tuple(means.shape) != expected:
            got = tuple(means.shape) if isinstance(means, torch.Tensor) else means
            raise ValueError(
                f"mode='mean' needs means of shape {expected} (head_means(model, tokens)), "
                f"got {got}."
            )


@contextmanager
def ablate_heads(model, heads: Iterable[tuple[int, int]], *, mode: str = "zero", means=None):
    """Inside the ``with`` block, replace these heads' outputs by zeros or by their means.

    A head's output is its ``head_dim`` slice of the input of its block's ``out_proj``
    (``(batch, seq_len, num_heads * head_dim)``, head ``h`` at features ``h * head_dim`` to
    ``(h + 1) * head_dim``). A forward pre-hook on ``out_proj`` (``torch.nn.Module.
    register_forward_pre_hook``) returns a copy with those slices replaced; leaving the block
    removes the hooks, even after an exception.

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``).
        heads: ``(layer, head)`` pairs, 0-based; an empty list ablates nothing.
        mode: Keyword-only. ``"zero"`` or ``"mean"`` (:data:`ABLATION_MODES`).
        means: Keyword-only. With ``mode="mean"``: ``(num_layers, num_heads, head_dim)``, each
            head's mean output (:func:`head_means`).

    Yields:
        None.

    Raises:
        TypeError: if a head is not a ``(layer, head)`` pair of ints.
        ValueError: if a head does not exist (the message gives the ranges), ``mode`` is not
            in :data:`ABLATION_MODES`, or ``mode="mean"`` without ``means`` of that shape.

    Source:
        Michel et al. 2019, arXiv:1905.10650, Sec. 2 (head masking); mean ablation: Wang et
        al. 2022, arXiv:2211.00593, Sec. 3.
    """
    if mode not in ABLATION_MODES:
        raise ValueError(f"mode must be one of {ABLATION_MODES}, got {mode!r}.")
    c = model.config
    _check_means(model, mode, means)
    by_layer = _group_by_layer(model, heads)
    handles = []
    try:
        for layer, layer_heads in by_layer.items():
            replacement = None if mode == "zero" else means[layer]  # (num_heads, head_dim)
            hook = _replace_heads_hook(layer_heads, c.num_heads, replacement)
            handles.append(model.layers[layer].attention.out_proj.register_forward_pre_hook(hook))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _replace_heads_hook(heads: list[int], num_heads: int, replacement: torch.Tensor | None):
    """A forward pre-hook for ``out_proj`` that replaces ``heads``' slices of its input."""
    index = torch.tensor(sorted(set(heads)))  # (k,)

    def hook(module, inputs):
        merged = inputs[0]  # (batch, seq_len, num_heads * head_dim)
        split = merged.unflatten(-1, (num_heads, -1)).clone()  # (batch, seq_len, heads, hd)
        if replacement is None:
            split[..., index, :] = 0.0
        else:
            split[..., index, :] = replacement[index].to(split.dtype)  # (k, head_dim)
        return (split.flatten(-2),)  # (batch, seq_len, embed_dim)

    return hook


@contextmanager
def scale_heads(model, heads: Iterable[tuple[int, int]], alpha: float):
    """Inside the ``with`` block, multiply these heads' outputs by ``alpha``.

    ``alpha = 0`` is zero ablation (:func:`ablate_heads`), ``alpha = 1`` changes nothing; the
    values between trace the loss along the straight line from the head's output to zero, the
    path whose slope at ``alpha = 1`` attribution patching (:func:`attribution_effects`)
    estimates. The same forward pre-hook on ``out_proj`` as :func:`ablate_heads`.

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``).
        heads: ``(layer, head)`` pairs, 0-based.
        alpha: the factor, a float.

    Yields:
        None.

    Raises:
        TypeError: if a head is not a ``(layer, head)`` pair of ints, or ``alpha`` is not a
            real number.
        ValueError: if a head does not exist.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"alpha must be a float (1.0 changes nothing), got {alpha!r}.")
    by_layer = _group_by_layer(model, heads)
    handles = []
    num_heads = model.config.num_heads
    try:
        for layer, layer_heads in by_layer.items():
            index = torch.tensor(sorted(set(layer_heads)))  # (k,)

            def hook(module, inputs, index=index):
                merged = inputs[0]  # (batch, seq_len, num_heads * head_dim)
                split = merged.unflatten(-1, (num_heads, -1)).clone()  # (batch, L, heads, hd)
                split[..., index, :] = split[..., index, :] * alpha  # (batch, L, k, hd)
                return (split.flatten(-2),)  # (batch, seq_len, embed_dim)

            handles.append(model.layers[layer].attention.out_proj.register_forward_pre_hook(hook))
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def _capture_head_outputs(model, keep_grad: bool = False):
    """Record every block's ``out_proj`` input, ``(batch, seq_len, heads, head_dim)``."""
    captured: dict[int, torch.Tensor] = {}
    handles = []

    def make(layer: int):
        def hook(module, inputs):
            merged = inputs[0]  # (batch, seq_len, embed_dim)
            if keep_grad:
                merged.retain_grad()
            captured[layer] = merged

        return hook

    try:
        for layer, block in enumerate(model.layers):
            handles.append(block.attention.out_proj.register_forward_pre_hook(make(layer)))
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def head_outputs(model, tokens: torch.Tensor) -> torch.Tensor:
    """Every head's output on ``tokens`` (what ``out_proj`` receives from it).

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``).
        tokens: ``(batch, seq_len)`` or ``(seq_len,)`` ids.

    Returns:
        torch.Tensor: ``(num_layers, batch, seq_len, num_heads, head_dim)``, float32.

    Raises:
        TypeError, ValueError: from the model's own check of ``tokens`` (not an integer
            tensor, empty, or ids outside the vocabulary).

    Source:
        The per-head output that Michel et al. 2019, arXiv:1905.10650, Sec. 2 gate: head
        ``h``'s slice of the concatenated heads, before the output projection.
    """
    c = model.config
    with torch.no_grad(), _capture_head_outputs(model) as captured:
        model(tokens)
    return torch.stack(
        [captured[layer].unflatten(-1, (c.num_heads, c.head_dim)) for layer in range(c.num_layers)]
    )  # (layers, batch, seq_len, heads, head_dim)


def head_means(model, tokens: torch.Tensor) -> torch.Tensor:
    """Each head's mean output over the batch and the positions of ``tokens``.

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``).
        tokens: ``(batch, seq_len)`` or ``(seq_len,)`` ids, the reference text.

    Returns:
        torch.Tensor: ``(num_layers, num_heads, head_dim)``, float32, for ``ablate_heads(...,
        mode="mean", means=...)``.

    Raises:
        TypeError, ValueError: as :func:`head_outputs`.

    Source:
        Mean ablation, as in Wang et al. 2022, arXiv:2211.00593 (a head's output replaced by its
        mean over a reference distribution rather than by zeros).
    """
    return head_outputs(model, tokens).mean(dim=(1, 2))  # (layers, heads, head_dim)


# ------------------------------------------------------------------------------------------------
# losses
# ------------------------------------------------------------------------------------------------


def copy_losses(model, repeated: torch.Tensor) -> tuple[float, float]:
    """Mean loss (nats per token) on the first and on the second copy of a repeated sequence.

    The first copy: predictions of tokens ``1 .. n - 1``; the second: of tokens
    ``n + 1 .. 2n - 1`` (token ``n`` restarts the sequence and cannot be predicted from the
    first copy, so neither mean includes it).

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``); ablations in force apply.
        repeated: ``(batch, 2n)`` from :func:`random_repeated_tokens`.

    Returns:
        tuple[float, float]: ``(first, second)``.

    Raises:
        ValueError: if ``repeated`` is not a ``(batch, 2n)`` tensor of two equal copies.

    Source:
        Olsson et al. 2022, arXiv:2209.11895, Sec. 2 (a repeated random sequence: only
        copying from the first copy predicts the second).
    """
    half_len = _check_repeated(repeated)
    with torch.no_grad():
        losses = model.token_losses(repeated)  # (batch, 2n - 1); entry t predicts token t + 1
    return float(losses[:, : half_len - 1].mean()), float(losses[:, half_len:].mean())


def pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson correlation of two equal-length vectors (flattened).

    Raises:
        ValueError: if the sizes differ or either is constant.
    """
    x, y = x.flatten().double(), y.flatten().double()  # (m,), (m,)
    if x.shape != y.shape or x.numel() < 2:
        raise ValueError(f"need two vectors of equal size >= 2, got {x.numel()} and {y.numel()}.")
    x, y = x - x.mean(), y - y.mean()
    denominator = float(x.norm() * y.norm())
    if denominator == 0.0:
        raise ValueError("a constant vector has no correlation.")
    return float((x * y).sum()) / denominator


def top_k_overlap(x: torch.Tensor, y: torch.Tensor, k: int) -> int:
    """How many of the ``k`` largest entries of ``x`` are among the ``k`` largest of ``y``."""
    top_x = set(x.flatten().argsort(descending=True)[:k].tolist())
    top_y = set(y.flatten().argsort(descending=True)[:k].tolist())
    return len(top_x & top_y)


# ------------------------------------------------------------------------------------------------
# every head's ablation effect: exact and attribution patching
# ------------------------------------------------------------------------------------------------


def _second_copy_loss(logits: torch.Tensor, repeated: torch.Tensor) -> torch.Tensor:
    """Mean loss on the second copy, from logits ``(batch, 2n, vocab)``; a 0-d tensor."""
    from mha_ref.tutorial.real_models.layers import next_token_losses

    half_len = repeated.shape[1] // 2
    return next_token_losses(logits, repeated)[:, half_len:].mean()


def clean_streams(model, tokens: torch.Tensor) -> list[torch.Tensor]:
    """The residual stream entering each block, and leaving the last, with nothing ablated.

    An ablation in block ``l`` leaves blocks ``0 .. l - 1`` as they were, so a run with it can
    start from ``streams[l]`` (:func:`ablated_token_losses`); the result is the same, bit for
    bit, as a full forward pass, which runs the same blocks on the same tensors.

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``), no ablation in force.
        tokens: ``(batch, seq_len)`` (or ``(seq_len,)``) torch.long token ids.

    Returns:
        list[torch.Tensor]: ``num_layers + 1`` tensors ``(batch, seq_len, embed_dim)``
        float32; entry ``l`` enters block ``l``, the last leaves the last block.

    Raises:
        TypeError, ValueError: as the model's ``embed`` (ids out of range, too long).

    Source:
        The residual stream view of a transformer (Elhage et al. 2021, "A Mathematical
        Framework for Transformer Circuits"); the forward pass is the model's own.
    """
    with torch.no_grad():
        residual = model.embed(tokens)  # (batch, seq_len, embed_dim)
        streams = [residual]
        for layer in range(model.config.num_layers):
            residual, _ = model.run_layers(residual, layer, layer + 1)
            streams.append(residual)  # stream entering block layer + 1
    return streams


def ablated_token_losses(
    model, streams: list[torch.Tensor], tokens: torch.Tensor, heads, *, mode: str = "zero",
    means=None,
) -> torch.Tensor:
    """Next-token losses with ``heads`` ablated, rerunning only the blocks from the first
    ablated one on the clean streams of :func:`clean_streams`.

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``).
        streams: ``clean_streams(model, tokens)``.
        tokens: ``(batch, seq_len)`` torch.long, the ids the streams were computed from.
        heads: ``(block, head)`` pairs to ablate (none: the clean losses).
        mode, means: Keyword-only; as :func:`ablate_heads`.

    Returns:
        torch.Tensor: ``(batch, seq_len - 1)`` float32, nats; entry ``t`` is the loss of
        predicting token ``t + 1`` (as the model's ``token_losses``, equal to it bit for bit).

    Raises:
        ValueError: if ``streams`` does not hold ``num_layers + 1`` streams of ``tokens``'
            batch and length, or as :func:`ablate_heads`.

    Source:
        Michel et al. 2019, arXiv:1905.10650, Sec. 2 (head masking).
    """
    tokens = model.check_tokens(tokens, min_len=2)  # (batch, seq_len)
    expected = (tokens.shape[0], tokens.shape[1], model.config.embed_dim)
    if len(streams) != model.config.num_layers + 1 or tuple(streams[0].shape) != expected:
        raise ValueError(
            f"streams must be clean_streams(model, tokens): {model.config.num_layers + 1} "
            f"tensors of shape {expected}; got {len(streams)} of shape "
            f"{tuple(streams[0].shape) if streams else None}. Compute them with "
            "clean_streams(model, tokens) for these tokens."
        )
    heads = list(heads)
    first = min((layer for layer, _ in heads), default=model.config.num_layers)
    with torch.no_grad(), ablate_heads(model, heads, mode=mode, means=means):
        out, _ = model.run_layers(streams[first], first)  # (batch, seq_len, embed_dim)
        return model.stream_token_losses(out, tokens)  # (batch, seq_len - 1)


def exact_effects(
    model, repeated: torch.Tensor, layers: Sequence[int], *, mode: str = "zero", means=None
) -> torch.Tensor:
    """The second-copy loss change when each head of ``layers`` alone is ablated.

    The residual stream entering each block is computed once; an ablation in block ``l``
    reruns blocks ``l .. num_layers - 1`` only.

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``).
        repeated: ``(batch, 2n)`` from :func:`random_repeated_tokens`.
        layers: the blocks whose heads are swept.
        mode, means: Keyword-only; as :func:`ablate_heads`.

    Returns:
        torch.Tensor: ``(len(layers), num_heads)`` float32, ablated minus clean loss, nats per
        token.

    Raises:
        ValueError: if ``repeated`` is not a ``(batch, 2n)`` tensor of two equal copies, or as
            :func:`ablate_heads` (a block that does not exist, a bad ``mode`` or ``means``).

    Source:
        Michel et al. 2019, arXiv:1905.10650, Sec. 2 (head masking); mean ablation: Wang et
        al. 2022, arXiv:2211.00593, Sec. 3.
    """
    _check_repeated(repeated)
    with torch.no_grad():
        entering = clean_streams(model, repeated)  # num_layers + 1 x (batch, 2n, embed_dim)
        clean = _second_copy_loss(model.unembed(entering[-1]), repeated)
        effects = torch.zeros(len(layers), model.config.num_heads)  # (window, heads)
        for row, layer in enumerate(layers):
            for head in range(model.config.num_heads):
                with ablate_heads(model, [(layer, head)], mode=mode, means=means):
                    out, _ = model.run_layers(entering[layer], layer)  # (batch, 2n, embed_dim)
                effects[row, head] = _second_copy_loss(model.unembed(out), repeated) - clean
    return effects


def attribution_effects(
    model, repeated: torch.Tensor, *, mode: str = "zero", means=None
) -> torch.Tensor:
    r"""First-order estimate of each head's ablation effect on the second-copy loss, alone.

    Math: :math:`\Delta L_h \approx \sum_{b,t,f} g_{b,t,f}\,(z'_{b,t,f} - z_{b,t,f})`, with
    :math:`z` head ``h``'s output, :math:`g = \partial L / \partial z` from **one** backward
    pass, and :math:`z'` its replacement (0, or its mean). Exact for a model linear in
    :math:`z`; a head whose removal changes the later heads' patterns a lot is where the
    estimate is least reliable.

    Each entry is the effect of ablating that head **alone**, all the others left intact. The
    network is non-linear (softmax, RMSNorm, SwiGLU), so the effects of heads ablated one at a
    time do not add up to the effect of ablating them together: the sum of some entries is not
    the joint effect of those heads, which can be larger (heads that back each other up) or
    smaller (heads that need each other). What this function claims is therefore a ranking of
    single heads by their estimated effect, to choose which heads to measure exactly; the effect
    of a set of heads has to be measured by ablating them together (:func:`ablate_heads` with
    all of them), and a single head's estimate checked against :func:`exact_effects`.

    Args:
        model: a loaded real model (``SmolLM2`` or ``Gemma3``).
        repeated: ``(batch, 2n)`` torch.long token ids, two equal copies of ``n`` tokens, from
            :func:`random_repeated_tokens`.
        mode, means: Keyword-only; as :func:`ablate_heads`.

    Returns:
        torch.Tensor: ``(num_layers, num_heads)`` float32, the estimated ablated minus clean
        second-copy loss of each head alone, nats per token (positive: the head helps).

    Raises:
        ValueError: if ``repeated`` is not a ``(batch, 2n)`` tensor of two equal copies,
            ``mode`` is not in :data:`ABLATION_MODES`, or ``mode="mean"`` without ``means`` of
            shape ``(num_layers, num_heads, head_dim)``.

    Source:
        Nanda 2023, "Attribution Patching: Activation Patching At Industrial Scale"
        (neelnanda.io); Syed et al. 2023, arXiv:2310.10348 (attribution patching as the
        first-order Taylor approximation of activation patching).
    """
    _check_repeated(repeated)
    if mode not in ABLATION_MODES:
        raise ValueError(f"mode must be one of {ABLATION_MODES}, got {mode!r}.")
    _check_means(model, mode, means)
    c = model.config
    with torch.enable_grad(), _capture_head_outputs(model, keep_grad=True) as captured:
        residual = model.embed(repeated).requires_grad_(True)  # (batch, 2n, embed_dim)
        residual, _ = model.run_layers(residual)  # (batch, 2n, embed_dim)
        _second_copy_loss(model.unembed(residual), repeated).backward()
    effects = torch.zeros(c.num_layers, c.num_heads)  # (layers, heads)
    for layer in range(c.num_layers):
        z = captured[layer].detach().unflatten(-1, (c.num_heads, c.head_dim))  # (b, L, h, hd)
        g = captured[layer].grad.unflatten(-1, (c.num_heads, c.head_dim))  # (b, L, h, hd)
        target = torch.zeros_like(z) if mode == "zero" else means[layer].expand_as(z)
        effects[layer] = (g * (target - z)).sum(dim=(0, 1, 3))  # (heads,)
    return effects


# ------------------------------------------------------------------------------------------------
# figure
# ------------------------------------------------------------------------------------------------


def plot_score_maps(
    maps: Sequence[torch.Tensor],
    titles: Sequence[str],
    *,
    xlabel: str,
    ylabel: str,
    colorbar_label: str,
):
    """Side-by-side heatmaps of per-head scores: rows blocks, columns heads, one colour scale.

    Args:
        maps: each ``(num_layers, num_heads)``, values in ``[0, 1]``.
        titles: one per map, in any language.
        xlabel, ylabel, colorbar_label: Keyword-only; labels.

    Returns:
        matplotlib.figure.Figure: the figure.

    Raises:
        ValueError: unless ``maps`` holds one or more 2-D tensors of one shape and ``titles``
            one title per map.

    Source:
        No paper: one matplotlib ``imshow`` per map, blocks down and heads across.
    """
    import matplotlib.pyplot as plt

    from mha_ref.tutorial.fonts import use_cjk_font_for

    shapes = {tuple(m.shape) for m in maps if isinstance(m, torch.Tensor)}
    if len(maps) < 1 or len(shapes) != 1 or len(next(iter(shapes))) != 2 or len(
        [m for m in maps if isinstance(m, torch.Tensor)]
    ) != len(maps):
        raise ValueError(
            f"plot_score_maps: maps must be one or more (num_layers, num_heads) tensors of one "
            f"shape, got shapes {[tuple(getattr(m, 'shape', ())) for m in maps]}; pass the "
            f"scores of head_scores(...)."
        )
    if len(titles) != len(maps):
        raise ValueError(
            f"plot_score_maps: {len(titles)} titles for {len(maps)} maps; give one title each."
        )
    use_cjk_font_for(*titles, xlabel, ylabel, colorbar_label)
    fig, axes = plt.subplots(
        1, len(maps), figsize=(7.0, 4.8), layout="constrained", sharey=True, squeeze=False
    )
    axes = axes[0]  # (len(maps),) one row of axes
    for ax, values, title in zip(axes, maps, titles, strict=True):
        image = ax.imshow(values.double().numpy(), cmap="viridis", vmin=0.0, vmax=1.0,
                          aspect="auto")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_xticks(range(values.shape[1]))
    axes[0].set_ylabel(ylabel)
    fig.colorbar(image, ax=list(axes), label=colorbar_label)
    return fig


def _stack_blocks(blocks: list) -> torch.Tensor:
    """``plot_every_head``'s blocks stacked, once each is checked: ``(num_layers, ...)``."""
    fix = "pass [w[0] for w in weights] of model(tokens, need_weights=True)"
    if not blocks:
        raise ValueError(f"plot_every_head: weights holds no block; {fix}.")
    for index, block in enumerate(blocks):
        if not isinstance(block, torch.Tensor):
            raise ValueError(
                f"plot_every_head: block {index}'s weights must be a torch.Tensor of shape "
                f"(num_heads, seq_len, seq_len), got {type(block).__name__}; {fix}."
            )
        if block.dim() != 3 or block.numel() == 0:
            raise ValueError(
                f"plot_every_head: block {index}'s weights must be a non-empty 3-D tensor "
                f"(num_heads, seq_len, seq_len), got shape {tuple(block.shape)}; {fix}."
            )
        if block.shape != blocks[0].shape:
            raise ValueError(
                f"plot_every_head: every block's weights must have one shape, got "
                f"{tuple(blocks[0].shape)} for block 0 and {tuple(block.shape)} for block "
                f"{index}; run every block on the same tokens ({fix})."
            )
    return torch.stack(blocks)  # (num_layers, num_heads, seq_len, seq_len)


def plot_every_head(
    weights: Sequence[torch.Tensor],
    labels: Sequence[str],
    *,
    layer_name: str,
    head_name: str,
    xlabel: str,
    ylabel: str,
    key_label: str,
    query_label: str,
    colorbar_label: str,
    title: str | None = None,
):
    """Every head of every block on one text, in one picture, with the view's overview attached.

    The picture is a mosaic: one small ``(seq_len, seq_len)`` heatmap per head, blocks across
    (left to right) and heads down, on one colour scale from 0 to 1, white lines between them.
    The figure's interactive view (:func:`~mha_ref.tutorial.live_views.attach_layer_head_view`)
    holds every head's weights rounded to 3 decimals, with a block menu and the overview of
    every head, one row per block.

    Args:
        weights: one ``(num_heads, seq_len, seq_len)`` tensor per block (``weights[layer][0]``
            of ``model(tokens, need_weights=True)``), or one
            ``(num_layers, num_heads, seq_len, seq_len)`` tensor.
        labels: one token string per position.
        layer_name, head_name: the words before a block's and a head's number in the view
            (e.g. ``"block"``, ``"head"``).
        xlabel, ylabel: the mosaic's axis labels (blocks, heads).
        key_label, query_label: the view's axis labels for one head (keys, queries).
        colorbar_label: the colour bar's label.
        title: the figure's title.

    Returns:
        matplotlib.figure.Figure: the figure, with its view data attached.

    Raises:
        ValueError: if ``weights`` holds no block, or a block's weights (named by its index)
            are not a non-empty 3-D ``torch.Tensor`` of the same shape as block 0's, or they
            are not ``(num_heads, seq_len, seq_len)`` with one label per position.

    Source:
        No paper: one matplotlib ``imshow`` of the tiled weights; the view is
        :func:`~mha_ref.tutorial.live_views.attach_layer_head_view`'s.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from mha_ref.tutorial.fonts import use_cjk_font_for
    from mha_ref.tutorial.live_views import attach_layer_head_view

    stacked = _stack_blocks(list(weights))  # a 4-D tensor is checked block by block, too
    if stacked.dim() != 4 or stacked.shape[2:] != (len(labels), len(labels)):
        raise ValueError(
            f"plot_every_head: weights must be (num_heads, seq_len, seq_len) per block with "
            f"seq_len = len(labels) = {len(labels)}, got {tuple(stacked.shape)} for all blocks; "
            f"pass [w[0] for w in weights] of model(tokens, need_weights=True)."
        )
    values = stacked.double().numpy()  # (num_layers, num_heads, seq_len, seq_len)
    num_layers, num_heads, seq_len, _ = values.shape
    step = seq_len + 1  # one heatmap and one white line
    mosaic = np.full((num_heads * step - 1, num_layers * step - 1), np.nan)  # (rows, columns)
    for layer in range(num_layers):
        for head in range(num_heads):
            rows = slice(head * step, head * step + seq_len)
            columns = slice(layer * step, layer * step + seq_len)
            mosaic[rows, columns] = values[layer, head]  # (seq_len, seq_len)

    use_cjk_font_for(*labels, layer_name, head_name, xlabel, ylabel, colorbar_label, title or "")
    cmap = plt.get_cmap("viridis").with_extremes(bad="white")
    fig, ax = plt.subplots(figsize=(10.0, 3.9), layout="constrained")
    image = ax.imshow(mosaic, cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest")
    centre = (seq_len - 1) / 2
    block_ticks = range(0, num_layers, 5)
    ax.set_xticks([b * step + centre for b in block_ticks], [str(b) for b in block_ticks])
    ax.set_yticks([h * step + centre for h in range(num_heads)], [str(h) for h in range(num_heads)])
    ax.tick_params(length=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, label=colorbar_label, shrink=0.8)
    attach_layer_head_view(
        fig,
        values,
        labels,
        labels,
        layer_names=[f"{layer_name} {n}" for n in range(num_layers)],
        head_names=[f"{head_name} {n}" for n in range(num_heads)],
        layer_word=layer_name,  # the view's labels say "block" as the page does
        decimals=3,
        vmax=1.0,
        cmap=plt.get_cmap("viridis"),
        title=title,
        colorbar_label=colorbar_label,
        xlabel=key_label,
        ylabel=query_label,
    )
    return fig


# ------------------------------------------------------------------------------------------------
# example 18: heads that share a key/value head, and attention sinks
# ------------------------------------------------------------------------------------------------


def pattern_similarity(weights: torch.Tensor) -> torch.Tensor:
    """How alike the heads' attention patterns are: cosine similarity of their weight matrices.

    Args:
        weights: ``(num_heads, seq_len, seq_len)`` of one block on one text (causal, so the
            entries above the diagonal are 0 in every head and add nothing).

    Returns:
        torch.Tensor: ``(num_heads, num_heads)``, float32, in ``[0, 1]`` (weights are
        non-negative); 1 on the diagonal.

    Raises:
        ValueError: if ``weights`` is not ``(num_heads, seq_len, seq_len)``.

    Source:
        No paper: the cosine similarity of the flattened weight matrices.
    """
    is_tensor = isinstance(weights, torch.Tensor)
    if not is_tensor or weights.dim() != 3 or weights.shape[1] != weights.shape[2]:
        shape = tuple(weights.shape) if is_tensor else type(weights).__name__
        raise ValueError(
            f"pattern_similarity: weights must be (num_heads, seq_len, seq_len), one block's "
            f"weights on one text, got {shape}; take weights[layer][0] of model(tokens, "
            f"need_weights=True)."
        )
    flat = weights.flatten(1).double()  # (heads, seq_len * seq_len)
    flat = flat / flat.norm(dim=1, keepdim=True)
    return (flat @ flat.T).float()  # (heads, heads)


def group_similarities(similarity: torch.Tensor, num_kv_heads: int) -> tuple[float, float]:
    """Mean similarity of head pairs in the same key/value group, and across groups.

    Args:
        similarity: ``(num_heads, num_heads)`` from :func:`pattern_similarity`.
        num_kv_heads: groups; heads ``g * size .. (g + 1) * size - 1`` share key/value head
            ``g``.

    Returns:
        tuple[float, float]: ``(within, across)``, each over the distinct pairs.

    Raises:
        TypeError: if ``similarity`` is not a floating-point ``torch.Tensor`` (a bool or
            integer tensor is refused), or ``num_kv_heads`` is not an int.
        ValueError: unless ``similarity`` is 2-D and square, and ``num_kv_heads`` is at least
            2 (one group has no pair across groups: that mean would be NaN) and divides its
            size with at least two heads per group (otherwise a group has no pair to compare).

    Source:
        The groups of grouped-query attention, Ainslie et al. 2023, arXiv:2305.13245, Sec. 2.2
        (consecutive query heads share one key/value head, as in ``mha_ref.grouped``).
    """
    if not isinstance(similarity, torch.Tensor):
        raise TypeError(
            f"group_similarities: similarity must be a (num_heads, num_heads) torch.Tensor, got "
            f"{type(similarity).__name__}; pass the result of pattern_similarity(weights)."
        )
    if not similarity.is_floating_point():
        raise TypeError(
            f"group_similarities: similarity must be a floating-point tensor of cosine "
            f"similarities, got dtype {similarity.dtype}; pass pattern_similarity(weights), not "
            f"a mask or counts (convert with similarity.float() if the numbers are right)."
        )
    if similarity.dim() != 2 or similarity.shape[0] != similarity.shape[1]:
        raise ValueError(
            f"group_similarities: similarity must be (num_heads, num_heads), got shape "
            f"{tuple(similarity.shape)}; pass pattern_similarity(weights) of one block."
        )
    if isinstance(num_kv_heads, bool) or not isinstance(num_kv_heads, int):
        raise TypeError(
            f"group_similarities: num_kv_heads must be an int, got "
            f"{type(num_kv_heads).__name__} ({num_kv_heads!r}); SmolLM2 has 3."
        )
    num_heads = similarity.shape[0]
    if (
        num_kv_heads < 2
        or num_heads % num_kv_heads != 0
        or num_heads // num_kv_heads < 2
    ):
        raise ValueError(
            f"group_similarities: need num_kv_heads a divisor of num_heads, with at least 2 "
            f"groups (the mean across groups needs two) and at least 2 heads per group (the "
            f"mean within a group needs a pair), got num_heads={num_heads} and "
            f"num_kv_heads={num_kv_heads!r}; SmolLM2 has 9 heads in 3 groups."
        )
    group = torch.arange(num_heads) // (num_heads // num_kv_heads)  # (heads,)
    same = group[:, None] == group[None, :]  # (heads, heads)
    distinct = ~torch.eye(num_heads, dtype=torch.bool)  # (heads, heads)
    return float(similarity[same & distinct].mean()), float(similarity[~same].mean())


def equal_groupings(num_heads: int, num_groups: int) -> list[torch.Tensor]:
    """Every way to split ``num_heads`` heads into ``num_groups`` unordered groups of equal size.

    Args:
        num_heads: heads to split (9 in SmolLM2).
        num_groups: groups, a divisor of ``num_heads`` with at least 2 heads per group.

    Returns:
        list[torch.Tensor]: one ``(num_heads,)`` torch.long tensor per split, the group of each
        head (groups numbered by their smallest head); the first is the grouped-query split,
        consecutive heads together. ``num_heads! / ((size!)^num_groups * num_groups!)`` of
        them: 280 for 9 heads in 3 groups.

    Raises:
        ValueError: unless ``num_groups >= 1`` divides ``num_heads`` into groups of at least 2.

    Source:
        A permutation null for a grouping (Good 2005, "Permutation, Parametric and Bootstrap
        Tests of Hypotheses", ch. 3): the statistic under every relabelling of the heads.
    """
    if num_groups < 1 or num_heads % num_groups != 0 or num_heads // num_groups < 2:
        raise ValueError(
            f"equal_groupings: num_groups must divide num_heads into groups of at least 2 "
            f"heads, got num_heads={num_heads}, num_groups={num_groups}; SmolLM2 has 9 heads "
            f"in 3 key/value groups."
        )
    size = num_heads // num_groups
    splits: list[list[list[int]]] = []

    def extend(groups: list[list[int]], left: list[int]) -> None:
        if not left:
            splits.append(groups)
            return
        first, rest = left[0], left[1:]  # the smallest free head opens the next group
        for others in itertools.combinations(rest, size - 1):
            extend(groups + [[first, *others]], [h for h in rest if h not in others])

    extend([], list(range(num_heads)))
    labels = []
    for groups in splits:
        label = torch.empty(num_heads, dtype=torch.long)  # (heads,)
        for g, members in enumerate(groups):
            label[members] = g
        labels.append(label)
    return labels


def grouping_gaps(similarity: torch.Tensor, groupings: list[torch.Tensor]) -> torch.Tensor:
    """Mean similarity within groups minus across groups, for each grouping of the heads.

    Args:
        similarity: ``(num_heads, num_heads)`` from :func:`pattern_similarity`.
        groupings: ``(num_heads,)`` group labels each, as :func:`equal_groupings` returns.

    Returns:
        torch.Tensor: ``(len(groupings),)`` float64, the within minus across gap of each.

    Raises:
        ValueError: if a grouping does not label every head, or leaves no pair within or
            across groups.

    Source:
        As :func:`group_similarities`, for any split of the heads instead of the grouped-query
        one.
    """
    num_heads = similarity.shape[0]
    distinct = ~torch.eye(num_heads, dtype=torch.bool)  # (heads, heads)
    gaps = []
    for label in groupings:
        if label.shape != (num_heads,):
            raise ValueError(
                f"grouping_gaps: each grouping must label the {num_heads} heads, got shape "
                f"{tuple(label.shape)}; use equal_groupings({num_heads}, num_groups)."
            )
        same = label[:, None] == label[None, :]  # (heads, heads)
        within, across = similarity[same & distinct], similarity[~same]
        if within.numel() == 0 or across.numel() == 0:
            raise ValueError(
                "grouping_gaps: a grouping needs a pair within a group and a pair across "
                "groups; use equal_groupings(num_heads, num_groups) with 2 or more groups of "
                "2 or more heads."
            )
        gaps.append(within.double().mean() - across.double().mean())
    return torch.stack(gaps)  # (groupings,)


def benjamini_hochberg(p_values: torch.Tensor, rate: float) -> list[int]:
    """The tests that a Benjamini-Hochberg procedure keeps at false-discovery rate ``rate``.

    Sort the ``m`` p-values, find the largest rank ``k`` with ``p_(k) <= k * rate / m``, and
    keep the tests of the ``k`` smallest.

    Args:
        p_values: ``(m,)`` p-values in ``[0, 1]``, one per test (here: per block).
        rate: the false-discovery rate to control, in ``(0, 1)``.

    Returns:
        list[int]: the indices of the kept tests, in increasing order.

    Raises:
        ValueError: if ``p_values`` is not a 1-D tensor of values in ``[0, 1]`` or ``rate``
            is not in ``(0, 1)``.

    Source:
        Benjamini & Hochberg 1995, "Controlling the False Discovery Rate", J. R. Stat. Soc. B
        57(1), Sec. 3.
    """
    if (
        not isinstance(p_values, torch.Tensor) or p_values.dim() != 1
        or bool((p_values < 0).any() or (p_values > 1).any())
    ):
        raise ValueError(
            f"benjamini_hochberg: p_values must be a 1-D tensor of values in [0, 1], got "
            f"{p_values!r}; pass one p-value per test."
        )
    if not 0 < rate < 1:
        raise ValueError(f"benjamini_hochberg: rate must be in (0, 1), got {rate!r}; e.g. 0.05.")
    m = p_values.numel()
    order = torch.argsort(p_values, stable=True)  # (m,)
    thresholds = torch.arange(1, m + 1, dtype=torch.float64) * rate / m  # (m,)
    passing = (p_values[order].double() <= thresholds).nonzero().flatten()
    if passing.numel() == 0:
        return []
    return sorted(order[: int(passing.max()) + 1].tolist())
