r"""Which rotation frequencies the heads of a real model use: SmolLM2-135M's RoPE, measured.

Every head of SmolLM2 (``mha_ref.tutorial.real_models.smollm2``) rotates its 64 query and key
features in 32 pairs (the ``"adjacent"`` layout: features ``2i, 2i + 1`` form pair ``i``);
pair ``i`` turns by ``100000 ** (-2i / 64)`` radians per token, so pair 0 by one radian per token
and pair 31 by about ``1.4e-5``. A score is the sum over the pairs of ``q_i . R k_i``; a pair can
only contribute as much as the product of the query's and the key's sizes in it. So the size of each
pair, measured on real text before the rotation, says which frequencies a head can use
(Barbero et al. 2024, "Round and Round We Go! What makes Rotary Positional Encodings useful?",
arXiv:2410.06205, Sec. 4: Gemma 7B puts most of the norm into the slowest pairs, and builds
its positional heads, such as previous-token heads, from the fastest).

The intervention: recompute one layer's attention with the rotation taken out of some pairs
(their angle set to 0, for queries and keys alike), and measure a head's weight on the previous
token as more and more pairs lose their rotation, the fastest first or the slowest first
(:func:`rotation_removal_curve`). Only that head's pattern is measured; the rest of the model
is not run on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from mha_ref.functional import split_heads
from mha_ref.masks import causal_mask
from mha_ref.rope import _rotate, rotary_frequencies
from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.fonts import use_cjk_font_for

__all__ = [
    "FrequencyUsage",
    "frequency_usage",
    "pair_sizes",
    "plot_pair_shares",
    "previous_token_scores",
    "queries_and_keys",
    "rope_head_analysis",
    "rotation_removal_curve",
    "weights_without_rotation",
]


# ------------------------------------------------------------------------------------------------
# the queries and keys of one layer, before the rotation
# ------------------------------------------------------------------------------------------------


def queries_and_keys(
    model, tokens: torch.Tensor, layer: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The queries and keys of block ``layer`` on ``tokens``, before the rotation.

    Args:
        model: a loaded ``SmolLM2`` (``mha_ref.tutorial.real_models.smollm2.load_smollm2()``).
        tokens: ``(seq_len,)`` ids.
        layer: the block, 0-based.

    Returns:
        ``queries (num_heads, L, head_dim)`` and ``keys (num_kv_heads, L, head_dim)``, float32.
    """
    with torch.no_grad():
        residual = model.embed(tokens)  # (1, L, embed_dim)
        residual, _ = model.run_layers(residual, 0, layer)  # (1, L, embed_dim) entering `layer`
        return _project(model, residual, layer)


def _project(model, residual: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Block ``layer``'s unrotated queries and keys from the residual stream entering it."""
    block = model.layers[layer]
    attention = block.attention
    x = block.attention_norm(residual)  # (1, L, embed_dim)
    queries = split_heads(attention.q_proj(x), attention.num_heads)[0]  # (heads, L, head_dim)
    keys = split_heads(attention.k_proj(x), attention.num_kv_heads)[0]  # (kv_heads, L, hd)
    return queries, keys


def pair_sizes(x: torch.Tensor) -> torch.Tensor:
    """The root-mean-square size of each rotated pair over the tokens.

    Math: :math:`s_i = \\sqrt{\\operatorname{mean}_t (x_{t,2i}^2 + x_{t,2i+1}^2)}` (adjacent
    pairs).

    Args:
        x: ``(heads, L, head_dim)`` queries or keys, before the rotation.

    Returns:
        ``(heads, head_dim // 2)`` float64.
    """
    pairs = x.double().unflatten(-1, (-1, 2))  # (heads, L, head_dim / 2, 2)
    return pairs.pow(2).sum(dim=-1).mean(dim=1).sqrt()  # (heads, head_dim / 2)


@dataclass
class FrequencyUsage:
    """The size of each rotated pair, for every head of every block, on one text.

    Attributes:
        query_sizes: ``(layers, num_heads, pairs)``; key_sizes: ``(layers, num_kv_heads, pairs)``
            (:func:`pair_sizes`).
        usage: ``(layers, num_heads, pairs)``, a query head's size times that of its key/value
            head: the most that pair can add to a score (Cauchy-Schwarz), before the scaling.
        frequencies: ``(pairs,)`` radians per token.
    """

    query_sizes: torch.Tensor
    key_sizes: torch.Tensor
    usage: torch.Tensor
    frequencies: torch.Tensor

    def share(self, pairs: Sequence[int]) -> torch.Tensor:
        """The fraction of each head's usage in the given pairs: ``(layers, num_heads)``."""
        chosen = self.usage[..., list(pairs)].sum(dim=-1)  # (layers, heads)
        return chosen / self.usage.sum(dim=-1)  # (layers, heads)


def frequency_usage(model, tokens: torch.Tensor) -> FrequencyUsage:
    """:class:`FrequencyUsage` of every block and head of ``model`` on ``tokens``.

    Args:
        model: a loaded ``SmolLM2`` (``mha_ref.tutorial.real_models.smollm2.load_smollm2()``).
        tokens: ``(seq_len,)`` ids.

    Returns:
        a :class:`FrequencyUsage`.
    """
    config = model.config
    query_sizes, key_sizes = [], []
    with torch.no_grad():
        residual = model.embed(tokens)  # (1, L, embed_dim)
        for layer in range(config.num_layers):
            queries, keys = _project(model, residual, layer)
            query_sizes.append(pair_sizes(queries))  # (heads, pairs)
            key_sizes.append(pair_sizes(keys))  # (kv_heads, pairs)
            residual, _ = model.run_layers(residual, layer, layer + 1)  # (1, L, embed_dim)
    return _usage(model, torch.stack(query_sizes), torch.stack(key_sizes))


def _usage(model, query_sizes: torch.Tensor, key_sizes: torch.Tensor) -> FrequencyUsage:
    """:class:`FrequencyUsage` from sizes ``(layers, heads, pairs)`` and ``(layers, kv, pairs)``."""
    config = model.config
    group = config.num_heads // config.num_kv_heads
    usage = query_sizes * key_sizes.repeat_interleave(group, dim=1)  # (layers, heads, pairs)
    frequencies = rotary_frequencies(config.head_dim, config.rope_base)  # (pairs,)
    return FrequencyUsage(query_sizes, key_sizes, usage, frequencies)


def plot_pair_shares(
    shares: torch.Tensor,
    *,
    title: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    colorbar_label: str | None = None,
) -> Figure:
    """A heatmap of each block's share per rotated pair: rows blocks, columns pairs.

    Args:
        shares: ``(layers, pairs)``, e.g. ``FrequencyUsage.usage`` divided by its sum
            over the pairs and averaged over a block's heads.
        title, xlabel, ylabel, colorbar_label: labels, in any language.

    Returns:
        The figure.
    """
    use_cjk_font_for(title, xlabel, ylabel, colorbar_label)
    fig, ax = plt.subplots(figsize=(7.0, 4.6), layout="constrained")
    image = ax.imshow(shares.double().numpy(), cmap="viridis", aspect="auto")
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    bar = fig.colorbar(image, ax=ax)
    if colorbar_label:
        bar.set_label(colorbar_label)
    return fig


# ------------------------------------------------------------------------------------------------
# the intervention: the rotation taken out of some pairs
# ------------------------------------------------------------------------------------------------


def weights_without_rotation(
    model, queries: torch.Tensor, keys: torch.Tensor, removed: torch.Tensor
) -> torch.Tensor:
    """One block's attention weights with the rotation taken out of the ``removed`` pairs.

    The queries and keys are rotated as the model does (positions ``0 .. L - 1``), except that
    the pairs marked in ``removed`` keep their angle 0 at every position; then the causal
    scores ``q . k / sqrt(head_dim)`` and their softmax. With nothing removed this is the
    block's own attention.

    Args:
        model: the model (for its sizes and base).
        queries: ``(heads, L, head_dim)``; keys: ``(kv_heads, L, head_dim)``, from
            :func:`queries_and_keys` (or a slice of them: query heads ``g * group ..`` with their
            key/value head ``g``); query head ``h`` reads key head ``h // (heads / kv_heads)``.
        removed: bool ``(head_dim // 2,)``, ``True`` for a pair that is not rotated.

    Returns:
        ``(num_heads, L, L)`` float32 weights.
    """
    config = model.config
    seq_len = queries.shape[1]
    frequencies = rotary_frequencies(config.head_dim, config.rope_base)  # (pairs,) float64
    frequencies = torch.where(removed, 0.0, frequencies)  # (pairs,) 0 = not rotated
    angles = torch.arange(seq_len, dtype=torch.float64)[:, None] * frequencies  # (L, pairs)
    cos, sin = angles.cos(), angles.sin()  # (L, pairs)
    rotated_q = _rotate(queries, cos, sin, config.head_dim, "adjacent")  # (heads, L, hd)
    rotated_k = _rotate(keys, cos, sin, config.head_dim, "adjacent")  # (kv_heads, L, hd)
    group = queries.shape[0] // keys.shape[0]  # query heads per key/value head
    rotated_k = rotated_k.repeat_interleave(group, dim=0)  # (heads, L, hd) each query head's
    scores = rotated_q @ rotated_k.transpose(-2, -1) / config.head_dim**0.5  # (heads, L, L)
    scores = scores.masked_fill(~causal_mask(seq_len), float("-inf"))  # (heads, L, L)
    return scores.softmax(dim=-1)  # (heads, L, L)


def previous_token_scores(weights: torch.Tensor) -> torch.Tensor:
    """Mean weight on the previous token (key ``t - 1``) over queries ``t >= 1``, per head.

    Args:
        weights: ``(heads, L, L)``.

    Returns:
        ``(heads,)`` float64.
    """
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).double().mean(dim=-1)  # (heads,)


def rotation_removal_curve(
    model, queries: torch.Tensor, keys: torch.Tensor, head: int, fastest_first: bool
) -> list[float]:
    """One head's previous-token score as the rotation is taken out of one more pair each time.

    Args:
        model: the model; queries, keys: from :func:`queries_and_keys`.
        head: the query head, 0-based.
        fastest_first: take the rotation out of pair 0 (the fastest) first, then 1, ...;
            ``False``: pair 31 (the slowest) first.

    Returns:
        ``pairs + 1`` scores: with all pairs rotated, then with 1, 2, ... pairs not rotated.
    """
    pairs = model.config.head_dim // 2
    order = list(range(pairs)) if fastest_first else list(range(pairs - 1, -1, -1))
    removed = torch.zeros(pairs, dtype=torch.bool)  # (pairs,)
    curve = []
    for count in range(pairs + 1):
        if count:
            removed[order[count - 1]] = True
        one_head = queries[head : head + 1]  # (1, L, head_dim)
        weights = weights_without_rotation(model, one_head, _kv(model, keys, head), removed)
        curve.append(round(float(previous_token_scores(weights)[0]), 6))
    return curve


def _kv(model, keys: torch.Tensor, head: int) -> torch.Tensor:
    """The key/value head that query ``head`` reads, as a group of one: ``(1, L, head_dim)``."""
    group = model.config.num_heads // model.config.num_kv_heads
    return keys[head // group : head // group + 1]


# ------------------------------------------------------------------------------------------------
# the whole analysis of example 21, cached
# ------------------------------------------------------------------------------------------------


def rope_head_analysis(text_name: str = "statements", max_tokens: int = 256) -> dict:
    """Every measurement example 21 prints, on one shipped text (cached on disk).

    Args:
        text_name: a text of ``mha_ref.tutorial.real_models.texts``.
        max_tokens: the first tokens of it that are used.

    Returns:
        A dict with ``tokens`` ``(L,)``; ``usage``, a :class:`FrequencyUsage`; ``previous``
        ``(layers, heads)``, every head's previous-token score (its block's weights recomputed
        with :func:`weights_without_rotation`, nothing removed, which is the model's own
        attention); ``head``, the best previous-token head as ``(layer, head)``; ``fast_first``
        and ``slow_first``, its :func:`rotation_removal_curve`; ``unrotated``
        ``(layers, heads)``, every head's previous-token score with no pair rotated in its
        block.
    """
    from mha_ref.tutorial.real_models.smollm2 import MODEL_FILE_SHA256
    from mha_ref.tutorial.real_models.texts import text_sha256

    arguments = {
        "text": text_sha256(text_name),
        "max_tokens": max_tokens,
        "model": MODEL_FILE_SHA256,
    }
    def compute() -> dict:
        from mha_ref.tutorial.real_models.loading import model_threads

        with model_threads():  # the real model's measurements run on two threads
            return _analysis(text_name, max_tokens)

    return cached("rope_head_analysis", arguments, compute)


def _analysis(text_name: str, max_tokens: int) -> dict:
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2
    from mha_ref.tutorial.real_models.texts import real_text

    model = load_smollm2("cpu")
    tokens = model.tokenizer.encode(real_text(text_name))[:max_tokens]  # (L,)
    config = model.config
    pairs = config.head_dim // 2
    nothing = torch.zeros(pairs, dtype=torch.bool)  # (pairs,) every pair rotated, as the model
    everything = torch.ones(pairs, dtype=torch.bool)  # (pairs,) no pair rotated
    previous, unrotated, query_sizes, key_sizes = [], [], [], []
    with torch.no_grad():
        residual = model.embed(tokens)  # (1, L, embed_dim)
        for layer in range(config.num_layers):
            q, k = _project(model, residual, layer)  # (heads, L, hd), (kv_heads, L, hd)
            query_sizes.append(pair_sizes(q))  # (heads, pairs)
            key_sizes.append(pair_sizes(k))  # (kv_heads, pairs)
            previous.append(previous_token_scores(weights_without_rotation(model, q, k, nothing)))
            unrotated.append(
                previous_token_scores(weights_without_rotation(model, q, k, everything))
            )  # (heads,)
            residual, _ = model.run_layers(residual, layer, layer + 1)  # (1, L, embed_dim)
    previous = torch.stack(previous)  # (layers, heads)
    layer, head = divmod(int(previous.argmax()), config.num_heads)
    queries, keys = queries_and_keys(model, tokens, layer)
    return {
        "tokens": tokens,
        "usage": _usage(model, torch.stack(query_sizes), torch.stack(key_sizes)),
        "previous": previous,
        "head": (layer, head),
        "fast_first": rotation_removal_curve(model, queries, keys, head, fastest_first=True),
        "slow_first": rotation_removal_curve(model, queries, keys, head, fastest_first=False),
        "unrotated": torch.stack(unrotated),  # (layers, heads)
    }
