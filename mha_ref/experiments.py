r"""Tiny, seeded experiments for the gallery: what heads learn, and how many heads to use.

**The task.** Sequences of ``seq_len`` random tokens from a vocabulary of ``vocab_size``. The
target at position ``t`` is ``table[token[t - 1], token[t - 2]]``, where ``table`` is a fixed
random ``(vocab_size, vocab_size)`` lookup table. Predicting it needs *two relations at once*:
"the previous token" and "the token before that", and the table is not symmetric, so the model
must also know which is which. Positions ``t < 2`` have no target. The two relations are the
``offsets`` argument, written as *key position minus query position* (``-1`` = previous token).

**The model.** Token embedding + learned position embedding, one causal
:class:`mha_ref.MultiHeadAttention` layer, and a two-layer MLP read-out per position. There is no
residual connection: everything the read-out knows about other tokens passed through attention.

**What is measured.** Accuracy on a fixed evaluation set, the loss curve, the per-head attention
weights on a fixed probe batch, the per-head entropy, and for each head the offset it attends to
most (:class:`HeadSummary`). Which head does what is read off the weights, never assumed.

**Determinism.** Every run is seeded, uses one CPU thread and
``torch.use_deterministic_algorithms(True)`` (restored afterwards), and leaves the global random
state untouched (``torch.random.fork_rng``), so the same arguments give the same numbers.

**Cache.** If the environment variable ``MHA_REF_CACHE_DIR`` names a folder, :func:`train` and
:func:`head_count_sweep` store their results there, keyed by a SHA-256 of the source of every
``mha_ref/*.py`` file, the function name, all arguments and the torch version; any change to
one of these is a different key, so a cached result is never stale. Without the variable nothing is
cached. The docs build runs every example twice (once per language); the second run is a cache hit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import pickle
import statistics
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from mha_ref.masks import allowed_to_blocked, causal_mask
from mha_ref.multihead import MultiHeadAttention

__all__ = [
    "CACHE_ENV_VAR",
    "HeadCountRow",
    "HeadSummary",
    "TinyAttentionModel",
    "TrainResult",
    "attention_flops",
    "attention_weight_bytes",
    "cache_key",
    "head_count_sweep",
    "make_batch",
    "make_table",
    "plot_head_count_sweep",
    "plot_head_profiles",
    "plot_loss_curves",
    "plot_relative_costs",
    "summarize_heads",
    "train",
]

#: Environment variable naming the cache folder; unset = no cache.
CACHE_ENV_VAR = "MHA_REF_CACHE_DIR"

#: A head whose largest mean weight on one offset reaches this is "focused" on that offset.
FOCUS_THRESHOLD = 0.5

#: A focused head's summary also names its second offset when that gets at least this much.
SECOND_RELATION_THRESHOLD = 0.1

_IGNORE = -100  # target value of positions without a target (cross_entropy's ignore_index)
_PROBE_SEED = 2_000_003  # fixed: every run is probed and evaluated on the same sequences
_EVAL_SEED = 1_000_003

T = TypeVar("T")


# ------------------------------------------------------------------------------------------------
# the task
# ------------------------------------------------------------------------------------------------


def make_table(vocab_size: int, seed: int = 0) -> torch.Tensor:
    """The random lookup table ``(vocab_size, vocab_size)`` of the task, fixed by ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(vocab_size, (vocab_size, vocab_size), generator=generator)  # (V, V)


def make_batch(
    batch_size: int,
    seq_len: int,
    table: torch.Tensor,
    generator: torch.Generator,
    offsets: tuple[int, int] = (-1, -2),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token sequences and their targets.

    The target at position ``t`` is ``table[token[t + offsets[0]], token[t + offsets[1]]]``.

    Args:
        batch_size: number of sequences.
        seq_len: tokens per sequence.
        table: the ``(vocab_size, vocab_size)`` lookup table (:func:`make_table`).
        generator: the random stream the tokens are drawn from.
        offsets: the two relations, as key position minus query position (both negative).

    Returns:
        ``tokens`` ``(batch_size, seq_len)`` and ``targets`` ``(batch_size, seq_len)``; targets
        are ``-100`` (ignored by ``cross_entropy``) where ``t + offset < 0``.
    """
    _check_offsets(offsets, seq_len)
    vocab_size = table.shape[0]
    tokens = torch.randint(vocab_size, (batch_size, seq_len), generator=generator)  # (B, L)
    targets = torch.full((batch_size, seq_len), _IGNORE, dtype=torch.long)  # (B, L)
    start = -min(offsets)  # first position where both related tokens exist
    positions = torch.arange(start, seq_len)  # (L - start,)
    first = tokens[:, positions + offsets[0]]  # (B, L - start)
    second = tokens[:, positions + offsets[1]]  # (B, L - start)
    targets[:, start:] = table[first, second]  # (B, L - start)
    return tokens, targets


def _check_offsets(offsets: Sequence[int], seq_len: int) -> None:
    if len(offsets) != 2 or any(not isinstance(o, int) or o >= 0 for o in offsets):
        raise ValueError(f"offsets must be two negative ints such as (-1, -2), got {offsets!r}")
    if offsets[0] == offsets[1]:
        raise ValueError(f"offsets must be two different relations, got {offsets!r}")
    if -min(offsets) >= seq_len:
        raise ValueError(f"offsets {offsets!r} reach before the start of seq_len={seq_len}")


# ------------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------------


class TinyAttentionModel(nn.Module):
    """Embeddings, one causal :class:`mha_ref.MultiHeadAttention` layer, an MLP read-out.

    Args:
        vocab_size: number of token ids.
        seq_len: longest sequence (size of the position embedding).
        embed_dim: model width ``d_model``.
        num_heads: attention heads ``h`` (must divide ``embed_dim``).
        mlp_hidden: hidden width of the read-out MLP.

    Shape:
        - tokens: ``(N, L)`` token ids.
        - logits: ``(N, L, vocab_size)``; weights: ``(N, num_heads, L, L)`` per head.
    """

    def __init__(
        self, vocab_size: int, seq_len: int, embed_dim: int, num_heads: int, mlp_hidden: int
    ) -> None:
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(seq_len, embed_dim)
        self.attention = MultiHeadAttention(embed_dim, num_heads, batch_first=True)
        self.readout = nn.Sequential(
            nn.Linear(embed_dim, mlp_hidden), nn.ReLU(), nn.Linear(mlp_hidden, vocab_size)
        )

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq_len = tokens.shape[1]
        positions = torch.arange(seq_len, device=tokens.device)  # (L,)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (N, L, E)
        blocked = allowed_to_blocked(causal_mask(seq_len, device=tokens.device))  # (L, L)
        context, weights = self.attention(
            x, x, x, attn_mask=blocked, need_weights=True, average_attn_weights=False
        )  # (N, L, E), (N, H, L, L)
        return self.readout(context), weights  # (N, L, V), (N, H, L, L)


# ------------------------------------------------------------------------------------------------
# reading the heads
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadSummary:
    """What one head attends to, measured on the probe batch.

    Attributes:
        head: head index.
        offset: the offset (key position minus query position) with the largest mean weight.
        weight: that mean weight (0..1).
        runner_up_offset, runner_up_weight: the second largest.
        entropy: mean entropy of the head's attention rows, in nats (0 = one key only).
        focused: ``weight >= FOCUS_THRESHOLD``.
        redundant_with: a lower-numbered focused head with the same offset, else ``None``.
    """

    head: int
    offset: int
    weight: float
    runner_up_offset: int
    runner_up_weight: float
    entropy: float
    focused: bool
    redundant_with: int | None = None

    def describe(self, language: str = "en") -> str:
        """One line of text, ``"en"`` or ``"zh_CN"``, built from the measured numbers."""
        if language not in ("en", "zh_CN"):
            raise ValueError(f"language must be 'en' or 'zh_CN', got {language!r}")
        en = language == "en"
        if self.focused:
            text = (
                f"head {self.head} attends mostly to offset {self.offset:+d} "
                f"(mean weight {self.weight:.2f})"
                if en
                else f"头 {self.head} 主要关注偏移 {self.offset:+d}（平均权重 {self.weight:.2f}）"
            )
        else:
            text = (
                f"head {self.head} is spread out: offset {self.offset:+d} "
                f"(mean weight {self.weight:.2f}) and {self.runner_up_offset:+d} "
                f"({self.runner_up_weight:.2f})"
                if en
                else f"头 {self.head} 的注意力较分散：偏移 {self.offset:+d}（平均权重 "
                f"{self.weight:.2f}）和 {self.runner_up_offset:+d}（{self.runner_up_weight:.2f}）"
            )
        if self.focused and self.runner_up_weight >= SECOND_RELATION_THRESHOLD:
            text += (
                f", then offset {self.runner_up_offset:+d} ({self.runner_up_weight:.2f})"
                if en
                else f"，其次是偏移 {self.runner_up_offset:+d}（{self.runner_up_weight:.2f}）"
            )
        if self.redundant_with is not None:
            text += (
                f"; redundant with head {self.redundant_with} (same offset)"
                if en
                else f"；与头 {self.redundant_with} 重复（偏移相同）"
            )
        return text


def offset_profile(weights: torch.Tensor, min_query: int = 0) -> torch.Tensor:
    """Mean attention weight per head and offset.

    Args:
        weights: ``(N, H, L, L)`` causal attention weights.
        min_query: only query positions ``t >= min_query`` are averaged (e.g. the positions that
            have a target).

    Returns:
        ``(H, L)``: entry ``[h, d]`` is the mean weight head ``h`` gives to the key ``d``
        positions back (offset ``-d``), over all queries where that key exists.
    """
    seq_len = weights.shape[-1]
    profile = torch.zeros(weights.shape[1], seq_len, dtype=torch.float64)  # (H, L)
    for back in range(seq_len):
        queries = torch.arange(max(min_query, back), seq_len)  # (Q,)
        if len(queries) == 0:
            continue
        w = weights[:, :, queries, queries - back]  # (N, H, Q)
        profile[:, back] = w.double().mean(dim=(0, 2))  # (H,)
    return profile


def head_entropy(weights: torch.Tensor, min_query: int = 0) -> torch.Tensor:
    """Mean entropy (nats) of each head's rows ``t >= min_query``: ``(N, H, L, L) -> (H,)``."""
    rows = weights[:, :, min_query:, :].double()  # (N, H, Q, L)
    entropy = -(rows * torch.log(rows.clamp_min(1e-30))).sum(dim=-1)  # (N, H, Q)
    return entropy.mean(dim=(0, 2))  # (H,)


def uniform_entropy(seq_len: int, min_query: int = 0) -> float:
    """Mean entropy of a causal head that spreads evenly over all allowed keys (the maximum)."""
    values = [math.log(t + 1) for t in range(min_query, seq_len)]
    return sum(values) / len(values)


def summarize_heads(weights: torch.Tensor, min_query: int = 0) -> list[HeadSummary]:
    """One :class:`HeadSummary` per head of ``weights`` ``(N, H, L, L)``, measured, not assumed."""
    profile = offset_profile(weights, min_query)  # (H, L)
    entropy = head_entropy(weights, min_query)  # (H,)
    summaries: list[HeadSummary] = []
    first_focused_on: dict[int, int] = {}
    for head in range(profile.shape[0]):
        top = torch.topk(profile[head], k=2)
        offset, runner_up = -int(top.indices[0]), -int(top.indices[1])
        weight = round(float(top.values[0]), 4)
        focused = weight >= FOCUS_THRESHOLD
        redundant_with = first_focused_on.get(offset) if focused else None
        if focused and redundant_with is None:
            first_focused_on[offset] = head
        summaries.append(
            HeadSummary(
                head=head,
                offset=offset,
                weight=weight,
                runner_up_offset=runner_up,
                runner_up_weight=round(float(top.values[1]), 4),
                entropy=round(float(entropy[head]), 4),
                focused=focused,
                redundant_with=redundant_with,
            )
        )
    return summaries


# ------------------------------------------------------------------------------------------------
# training
# ------------------------------------------------------------------------------------------------


@dataclass
class TrainResult:
    """Everything one :func:`train` run measured.

    Attributes:
        config: the arguments of the run.
        accuracy: fraction of correct predictions on the fixed evaluation set (positions with a
            target only).
        loss_curve: training loss after each step.
        num_parameters: parameters of the whole model; ``attention_parameters`` of the attention
            layer alone.
        probe_tokens: ``(P, L)`` the first probe sequences; ``probe_weights`` ``(P, H, L, L)``
            their per-head attention weights.
        offset_profile: ``(H, L)`` mean weight per head on each offset ``0, -1, -2, ...``
            (column ``d`` is offset ``-d``), over the whole probe batch.
        entropy: ``(H,)`` mean row entropy per head in nats; ``max_entropy``: the entropy of a
            head spreading evenly over all allowed keys.
        heads: one :class:`HeadSummary` per head.
        table: the task's lookup table ``(V, V)``.
    """

    config: dict[str, Any]
    accuracy: float
    loss_curve: list[float]
    num_parameters: int
    attention_parameters: int
    probe_tokens: torch.Tensor
    probe_weights: torch.Tensor
    offset_profile: torch.Tensor
    entropy: torch.Tensor
    max_entropy: float
    heads: list[HeadSummary]
    table: torch.Tensor = field(repr=False)

    def relations_found(self) -> list[int]:
        """Distinct offsets that some focused head attends to, nearest first."""
        return sorted({h.offset for h in self.heads if h.focused}, reverse=True)

    def relations_missing(self) -> list[int]:
        """The task's offsets that no focused head attends to."""
        found = set(self.relations_found())
        return [o for o in self.config["offsets"] if o not in found]


@contextlib.contextmanager
def _reproducible(threads: int = 1) -> Iterator[None]:
    """Fixed thread count, deterministic kernels, global RNG state restored on exit."""
    old_threads = torch.get_num_threads()
    old_deterministic = torch.are_deterministic_algorithms_enabled()
    old_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.use_deterministic_algorithms(old_deterministic, warn_only=old_warn_only)
        torch.set_num_threads(old_threads)


def train(
    *,
    num_heads: int = 4,
    embed_dim: int = 16,
    vocab_size: int = 16,
    seq_len: int = 8,
    offsets: tuple[int, int] = (-1, -2),
    steps: int = 200,
    batch_size: int = 64,
    lr: float = 1e-2,
    mlp_hidden: int = 64,
    seed: int = 0,
    table_seed: int = 0,
    eval_size: int = 1024,
    probe_size: int = 256,
    probe_keep: int = 4,
) -> TrainResult:
    """Train :class:`TinyAttentionModel` on the lookup-table task (CPU, seeded, deterministic).

    Args:
        num_heads, embed_dim, vocab_size, seq_len, mlp_hidden: the model and task sizes.
        offsets: the two relations the target depends on (key minus query position).
        steps, batch_size, lr: Adam steps, sequences per step, learning rate.
        seed: model initialisation and training data; ``table_seed``: the lookup table.
        eval_size: sequences in the fixed evaluation set (the same for every ``seed``).
        probe_size: sequences whose attention weights are summarised (fixed, the same for every
            ``seed``); ``probe_keep``: how many of them to return with their weights.

    Returns:
        a :class:`TrainResult`. Cached on disk when ``MHA_REF_CACHE_DIR`` is set.
    """
    arguments = dict(
        num_heads=num_heads,
        embed_dim=embed_dim,
        vocab_size=vocab_size,
        seq_len=seq_len,
        offsets=tuple(offsets),
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        mlp_hidden=mlp_hidden,
        seed=seed,
        table_seed=table_seed,
        eval_size=eval_size,
        probe_size=probe_size,
        probe_keep=probe_keep,
    )
    _check_offsets(arguments["offsets"], seq_len)
    return _cached("train", arguments, lambda: _train(**arguments))


def _train(**config: Any) -> TrainResult:
    offsets = config["offsets"]
    start = -min(offsets)
    table = make_table(config["vocab_size"], config["table_seed"])  # (V, V)
    with _reproducible():
        torch.manual_seed(config["seed"])
        model = TinyAttentionModel(
            config["vocab_size"],
            config["seq_len"],
            config["embed_dim"],
            config["num_heads"],
            config["mlp_hidden"],
        )
        optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
        data = torch.Generator().manual_seed(config["seed"])
        loss_curve = []
        for _ in range(config["steps"]):
            tokens, targets = make_batch(
                config["batch_size"], config["seq_len"], table, data, offsets
            )  # (B, L), (B, L)
            logits, _ = model(tokens)  # (B, L, V)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=_IGNORE)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_curve.append(round(loss.item(), 6))

        model.eval()
        with torch.no_grad():
            eval_gen = torch.Generator().manual_seed(_EVAL_SEED)
            tokens, targets = make_batch(
                config["eval_size"], config["seq_len"], table, eval_gen, offsets
            )  # (N_eval, L), (N_eval, L)
            logits, _ = model(tokens)  # (N_eval, L, V)
            has_target = targets != _IGNORE  # (N_eval, L)
            correct = logits.argmax(dim=-1)[has_target] == targets[has_target]  # (n,)
            accuracy = round(float(correct.double().mean()), 6)

            probe_gen = torch.Generator().manual_seed(_PROBE_SEED)
            probe_tokens, _ = make_batch(
                config["probe_size"], config["seq_len"], table, probe_gen, offsets
            )  # (P, L)
            _, weights = model(probe_tokens)  # (P, H, L, L)

    keep = config["probe_keep"]
    return TrainResult(
        config=dict(config),
        accuracy=accuracy,
        loss_curve=loss_curve,
        num_parameters=sum(p.numel() for p in model.parameters()),
        attention_parameters=sum(p.numel() for p in model.attention.parameters()),
        probe_tokens=probe_tokens[:keep].clone(),  # (keep, L)
        probe_weights=weights[:keep].clone(),  # (keep, H, L, L)
        offset_profile=offset_profile(weights, start).float(),  # (H, L)
        entropy=head_entropy(weights, start).float(),  # (H,)
        max_entropy=uniform_entropy(config["seq_len"], start),
        heads=summarize_heads(weights, start),
        table=table,
    )


# ------------------------------------------------------------------------------------------------
# how many heads
# ------------------------------------------------------------------------------------------------


def attention_flops(batch: int, seq_len: int, embed_dim: int, num_heads: int) -> dict[str, int]:
    r"""Analytic forward FLOPs of one self-attention layer (a multiply-add counts as 2 FLOPs).

    With :math:`N` = ``batch``, :math:`L` = ``seq_len``, :math:`E` = ``embed_dim``,
    :math:`h` = ``num_heads`` and :math:`d_k = E / h`:

    * ``projections``: Q, K, V and the output projection, :math:`4 \cdot 2NLE^2`
      (independent of :math:`h`);
    * ``scores``: :math:`QK^\top` for every head, :math:`h \cdot 2NL^2 d_k = 2NL^2E`
      (independent of :math:`h`);
    * ``weighted_sum``: weights times :math:`V`, :math:`2NL^2E` (independent of :math:`h`);
    * ``softmax``: scale, max, subtract, exp, sum and divide, counted as one operation per
      element each, :math:`6NhL^2` (**grows linearly** with :math:`h`);
    * ``total``: the sum.

    Biases, the mask and dropout are left out. The matrix products cost the same for every ``h``
    (the heads split ``E``, they do not add to it); only the element-wise work on the
    ``(N, h, L, L)`` score tensor grows with ``h``.
    """
    if embed_dim % num_heads:
        raise ValueError(f"num_heads={num_heads} must divide embed_dim={embed_dim}")
    head_dim = embed_dim // num_heads
    parts = {
        "projections": 4 * 2 * batch * seq_len * embed_dim * embed_dim,
        "scores": num_heads * 2 * batch * seq_len * seq_len * head_dim,
        "weighted_sum": num_heads * 2 * batch * seq_len * seq_len * head_dim,
        "softmax": 6 * batch * num_heads * seq_len * seq_len,
    }
    parts["total"] = sum(parts.values())
    return parts


def attention_weight_bytes(
    batch: int, seq_len: int, num_heads: int, dtype: torch.dtype = torch.float32
) -> int:
    """Bytes of the attention-weight tensor ``(batch, num_heads, seq_len, seq_len)``."""
    element = torch.empty((), dtype=dtype).element_size()
    return batch * num_heads * seq_len * seq_len * element


@dataclass
class HeadCountRow:
    """One head count of :func:`head_count_sweep`.

    Attributes:
        num_heads, head_dim: ``h`` and ``d_k = embed_dim / h``.
        attention_parameters: parameters of the attention layer (constant in ``h``).
        flops: :func:`attention_flops` ``["total"]`` for the reference shape;
            ``matmul_flops`` the part that does not depend on ``h``.
        weight_bytes: :func:`attention_weight_bytes` for the reference shape (float32).
        accuracies: accuracy of each seed; ``accuracy_mean``, ``accuracy_std`` (sample standard
            deviation), ``accuracy_min``, ``accuracy_max`` over the seeds.
    """

    num_heads: int
    head_dim: int
    attention_parameters: int
    flops: int
    matmul_flops: int
    weight_bytes: int
    accuracies: list[float]
    accuracy_mean: float
    accuracy_std: float
    accuracy_min: float
    accuracy_max: float


def head_count_sweep(
    head_counts: Sequence[int] = (1, 2, 4, 8),
    *,
    embed_dim: int = 16,
    seeds: Sequence[int] = (0, 1, 2),
    cost_batch: int = 32,
    cost_seq_len: int = 128,
    **train_kwargs: Any,
) -> list[HeadCountRow]:
    """Train the tiny task for every head count and seed at fixed ``embed_dim``; add the costs.

    Args:
        head_counts: values of ``h`` (each must divide ``embed_dim``).
        embed_dim: the fixed model width.
        seeds: training seeds per head count (at least 3 for a meaningful spread).
        cost_batch, cost_seq_len: the shape ``(batch, seq_len)`` at which FLOPs and weight memory
            are computed (the training shape is tiny; costs matter at larger ones).
        train_kwargs: passed to :func:`train` (``steps``, ``vocab_size``, ...).

    Returns:
        one :class:`HeadCountRow` per head count. Cached when ``MHA_REF_CACHE_DIR`` is set.
    """
    for h in head_counts:
        if embed_dim % h:
            raise ValueError(f"head count {h} must divide embed_dim={embed_dim}")
    if len(seeds) < 2:
        raise ValueError(f"seeds needs at least 2 entries for a spread, got {list(seeds)}")
    arguments = dict(
        head_counts=tuple(head_counts),
        embed_dim=embed_dim,
        seeds=tuple(seeds),
        cost_batch=cost_batch,
        cost_seq_len=cost_seq_len,
        train_kwargs=dict(train_kwargs),
    )
    return _cached("head_count_sweep", arguments, lambda: _head_count_sweep(**arguments))


def _head_count_sweep(
    head_counts: tuple[int, ...],
    embed_dim: int,
    seeds: tuple[int, ...],
    cost_batch: int,
    cost_seq_len: int,
    train_kwargs: dict[str, Any],
) -> list[HeadCountRow]:
    rows = []
    for h in head_counts:
        results = [train(num_heads=h, embed_dim=embed_dim, seed=s, **train_kwargs) for s in seeds]
        accuracies = [r.accuracy for r in results]
        flops = attention_flops(cost_batch, cost_seq_len, embed_dim, h)
        rows.append(
            HeadCountRow(
                num_heads=h,
                head_dim=embed_dim // h,
                attention_parameters=results[0].attention_parameters,
                flops=flops["total"],
                matmul_flops=flops["projections"] + flops["scores"] + flops["weighted_sum"],
                weight_bytes=attention_weight_bytes(cost_batch, cost_seq_len, h),
                accuracies=accuracies,
                accuracy_mean=round(statistics.fmean(accuracies), 6),
                accuracy_std=round(statistics.stdev(accuracies), 6),
                accuracy_min=min(accuracies),
                accuracy_max=max(accuracies),
            )
        )
    return rows


# ------------------------------------------------------------------------------------------------
# figures (labels are arguments, so each language passes its own)
# ------------------------------------------------------------------------------------------------


def plot_head_profiles(
    result: TrainResult,
    *,
    title: str = "Which offset each head attends to",
    offset_label: str = "offset (key position - query position)",
    head_label: str = "head {}",
    entropy_title: str = "Mean entropy of each head",
    entropy_label: str = "entropy (nats)",
    uniform_label: str = "uniform over allowed keys",
    colorbar_label: str = "mean attention weight",
) -> Figure:
    """Left: mean weight per head and offset (a heatmap); right: mean entropy per head.

    The numbers are ``result.offset_profile`` and ``result.entropy``, measured on the probe
    batch over the query positions that have a target.
    """
    import matplotlib.pyplot as plt

    from mha_ref.viz import use_cjk_font_for

    use_cjk_font_for(
        title, offset_label, head_label, entropy_title, entropy_label, uniform_label, colorbar_label
    )
    profile = result.offset_profile.numpy()  # (H, L)
    num_heads, seq_len = profile.shape
    heads = [head_label.format(h) for h in range(num_heads)]
    fig, (ax_profile, ax_entropy) = plt.subplots(
        1, 2, figsize=(10, 1.2 + 0.6 * num_heads), width_ratios=(2.2, 1), layout="constrained"
    )
    image = ax_profile.imshow(profile, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for h in range(num_heads):
        for d in range(seq_len):
            value = profile[h, d]
            colour = "white" if value < 0.6 else "black"
            ax_profile.text(d, h, f"{value:.2f}", ha="center", va="center", color=colour)
    ax_profile.set_xticks(range(seq_len), labels=[f"{-d:+d}" if d else "0" for d in range(seq_len)])
    ax_profile.set_yticks(range(num_heads), labels=heads)
    ax_profile.set_xlabel(offset_label)
    ax_profile.set_title(title, fontsize=11)
    fig.colorbar(image, ax=ax_profile, shrink=0.9, label=colorbar_label)

    entropy = result.entropy.numpy()  # (H,)
    ax_entropy.barh(range(num_heads), entropy, color="#2b6ca3")
    for h, value in enumerate(entropy):
        ax_entropy.text(value, h, f" {value:.3f}", va="center", fontsize=8)
    ax_entropy.axvline(result.max_entropy, color="grey", linestyle="--", label=uniform_label)
    ax_entropy.set_yticks(range(num_heads), labels=heads)
    ax_entropy.invert_yaxis()
    ax_entropy.set_xlim(0, result.max_entropy * 1.1)
    ax_entropy.set_xlabel(entropy_label)
    ax_entropy.set_title(entropy_title, fontsize=11)
    ax_entropy.legend(loc="lower right", fontsize=8)
    return fig


def plot_loss_curves(
    curves: dict[str, Sequence[float]],
    *,
    title: str = "Training loss",
    xlabel: str = "training step",
    ylabel: str = "cross-entropy loss (log scale)",
) -> Figure:
    """Loss against training step, one line per entry of ``curves`` (label -> losses), log y.

    The y axis is logarithmic, with labels at 1, 2 and 5 times each power of ten, so the values
    between the powers can be read; say so in ``ylabel``.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    from mha_ref.viz import use_cjk_font_for

    use_cjk_font_for(title, xlabel, ylabel, list(curves))
    fig, ax = plt.subplots(figsize=(5.5, 3), layout="constrained")
    for label, losses in curves.items():
        ax.plot(range(1, len(losses) + 1), losses, label=label)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
    ax.grid(True, which="major", axis="y", alpha=0.3)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    if len(curves) > 1:
        ax.legend(fontsize=8)
    return fig


def plot_relative_costs(
    head_counts: Sequence[int],
    series: dict[str, Sequence[float]],
    *,
    title: str = "Cost relative to one head",
    xlabel: str = "number of heads h",
    ylabel: str = "relative to h = 1",
) -> Figure:
    """Each cost in ``series`` (label -> one value per head count) divided by its first value."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from mha_ref.viz import use_cjk_font_for

    use_cjk_font_for(title, xlabel, ylabel, list(series))
    fig, ax = plt.subplots(figsize=(5.8, 3.6), layout="constrained")
    # overlapping series (e.g. two flat ones) stay visible: shrinking markers, varied dashes
    markers, styles = "osD^v<>", ("-", "--", "-", "--", ":", "-.")
    for i, (label, values) in enumerate(series.items()):
        relative = [v / values[0] for v in values]
        ax.plot(
            head_counts,
            relative,
            marker=markers[i % len(markers)],
            markersize=9 - 1.2 * i,
            linestyle=styles[i % len(styles)],
            label=label,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    ax.set_xticks(head_counts, labels=[str(h) for h in head_counts])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8)
    return fig


def plot_head_count_sweep(
    rows: Sequence[HeadCountRow],
    published: Sequence[dict[str, float]] | None = None,
    *,
    heads_label: str = "number of heads h",
    accuracy_label: str = "accuracy (mean ± std over seeds)",
    seeds_label: str = "one seed",
    accuracy_title: str = "Tiny task, this build",
    bleu_label: str = "BLEU (EN-DE newstest2013)",
    bleu_title: str = "Vaswani et al. 2017, Table 3 (A)",
    base_heads: int | None = 8,
    base_label: str = "base model",
    min_bleu_span: float = 3.0,
) -> Figure:
    """Accuracy of :func:`head_count_sweep` against ``h`` (error bars: standard deviation over
    seeds; dots: single seeds); beside it, if given, the published BLEU against ``h``
    (``published``: dicts with keys ``"h"`` and ``"bleu"``).

    The BLEU axis spans at least ``min_bleu_span`` BLEU, so a gap of a fraction of a point is not
    drawn as if it were large; the row with ``h == base_heads`` is marked ``base_label``.
    """
    import matplotlib.pyplot as plt

    from mha_ref.viz import use_cjk_font_for

    use_cjk_font_for(
        heads_label, accuracy_label, seeds_label, accuracy_title, bleu_label, bleu_title, base_label
    )
    panels = 2 if published else 1
    fig, axes = plt.subplots(
        1, panels, figsize=(4.6 * panels, 3.6), layout="constrained", squeeze=False
    )
    ax = axes[0, 0]
    hs = [row.num_heads for row in rows]
    ax.errorbar(
        hs,
        [row.accuracy_mean for row in rows],
        yerr=[row.accuracy_std for row in rows],
        marker="o",
        capsize=4,
        color="#2b6ca3",
        label=accuracy_label,
    )
    for i, row in enumerate(rows):
        ax.scatter(
            [row.num_heads] * len(row.accuracies),
            row.accuracies,
            s=14,
            color="#e07b39",
            zorder=3,
            label=seeds_label if i == 0 else None,
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(hs, labels=[str(h) for h in hs])
    ax.set_xlabel(heads_label)
    ax.set_ylabel(accuracy_label)
    ax.set_title(accuracy_title, fontsize=11)
    ax.legend(fontsize=8, loc="lower center")
    if published:
        ax = axes[0, 1]
        ph = [int(row["h"]) for row in published]
        ax.plot(ph, [row["bleu"] for row in published], marker="s", color="#3a7d44")
        for row in published:
            ax.annotate(
                f"{row['bleu']:.1f}",
                (row["h"], row["bleu"]),
                textcoords="offset points",
                xytext=(0, 9),
                ha="center",
                fontsize=8,
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks(ph, labels=[str(h) for h in ph])
        ax.set_xlabel(heads_label)
        ax.set_ylabel(bleu_label)
        ax.set_title(bleu_title, fontsize=11)
        low, high = min(r["bleu"] for r in published), max(r["bleu"] for r in published)
        half = max(min_bleu_span, high - low + 0.6) / 2
        ax.set_ylim((low + high) / 2 - half, (low + high) / 2 + half)
        base = [row for row in published if base_heads is not None and row["h"] == base_heads]
        if base:
            ax.scatter(
                [base[0]["h"]],
                [base[0]["bleu"]],
                s=160,
                facecolors="none",
                edgecolors="#c0392b",
                linewidths=1.5,
                zorder=3,
                label=base_label,
            )
            ax.legend(fontsize=8, loc="lower center")
    return fig


# ------------------------------------------------------------------------------------------------
# on-disk cache
# ------------------------------------------------------------------------------------------------


def _source_fingerprint() -> str:
    """SHA-256 of every ``mha_ref/*.py`` file (names and contents), in name order."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def _canonical(value: Any) -> Any:
    """Arguments as JSON-able data; tuples and lists alike, floats by ``repr``."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float):
        return {"float": repr(value)}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"cannot build a cache key from an argument of type {type(value).__name__}")


def cache_key(function: str, arguments: dict[str, Any]) -> str:
    """The cache key: SHA-256 of (mha_ref source, function name, arguments, torch version)."""
    payload = {
        "source": _source_fingerprint(),
        "function": function,
        "arguments": _canonical(arguments),
        "torch": torch.__version__,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _cached(function: str, arguments: dict[str, Any], compute: Callable[[], T]) -> T:
    directory = os.environ.get(CACHE_ENV_VAR)
    if not directory:
        return compute()
    folder = Path(directory)
    path = folder / f"{function}-{cache_key(function, arguments)}.pkl"
    if path.is_file():
        try:
            with path.open("rb") as f:
                return pickle.load(f)
        except Exception:  # a damaged file is recomputed and replaced
            pass
    result = compute()
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False) as f:
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(f.name, path)  # atomic: readers never see a half-written file
    return result
