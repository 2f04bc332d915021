r"""The low-rank bottleneck: how well one head of width ``head_dim`` can match an attention pattern.

**Source.** Bhojanapalli et al. 2020, "Low-Rank Bottleneck in Multi-head Attention Models"
(arXiv:2002.07028), section 3 (Theorem 1 and the discussion after it).

One head's scores on ``L`` keys are ``S = X W_Q W_K^T X^T / sqrt(head_dim)``: a product through
``head_dim`` columns, so ``rank(S) <= head_dim``. The softmax ignores a constant added to a row,
so (with inputs ``X`` of rank ``L``) a head can produce the pattern ``P`` exactly when
``log P + c 1^T`` has rank ``head_dim`` or less for some column ``c`` of per-row constants.
Centring every row makes the rows sum to zero, so the centred ``log P`` has rank at most
``L - 1``: with ``head_dim >= L - 1`` every row-stochastic ``P`` with positive entries is
reachable (Theorem 1 of the paper states ``head_dim >= L``; the per-row constant makes it one
less); with ``head_dim < L - 1`` most are not. Splitting a fixed ``embed_dim`` into ``h`` heads
gives each ``head_dim = embed_dim / h``.

**How the fit is made.** :func:`fit_closed_form` takes the best rank-``head_dim`` approximation
(truncated SVD) of the row-centred target log-probabilities, and solves for ``W_Q, W_K`` through
the pseudo-inverse of ``X``; :func:`fit_descent` then refines both by Adam on the KL divergence
itself. Everything is float64, seeded, on one thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.training import _reproducible

__all__ = [
    "LowRankSweep",
    "fit_closed_form",
    "fit_descent",
    "head_scores",
    "kl_divergence",
    "low_rank_sweep",
    "make_inputs",
    "make_targets",
]


# ------------------------------------------------------------------------------------------------


def make_inputs(seq_len: int, embed_dim: int, seed: int = 0) -> torch.Tensor:
    """Fixed random inputs ``X``: ``(seq_len, embed_dim)`` float64, standard normal.

    With ``embed_dim >= seq_len`` they have rank ``seq_len`` (almost surely), as Theorem 1 of
    Bhojanapalli et al. 2020 assumes.
    """
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(seq_len, embed_dim, generator=generator, dtype=torch.float64)  # (L, E)


def make_targets(
    num_targets: int, seq_len: int, sharpness: float = 3.0, seed: int = 1
) -> torch.Tensor:
    """Random target attention patterns: ``softmax(sharpness * G)`` per row, ``G`` Gaussian.

    Args:
        num_targets: patterns ``T``.
        seq_len: queries and keys ``L``.
        sharpness: scale of the logits; larger gives sharper rows (most weight on a few keys).
        seed: the random stream.

    Returns:
        ``(T, L, L)`` float64, every row positive and summing to 1.

    Raises:
        ValueError: ``sharpness`` is not positive.
    """
    if not sharpness > 0:
        raise ValueError(f"sharpness must be positive, got {sharpness}")
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(num_targets, seq_len, seq_len, generator=generator, dtype=torch.float64)
    return (sharpness * logits).softmax(dim=-1)  # (T, L, L)


def head_scores(x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor) -> torch.Tensor:
    """One head's scores ``X W_Q (X W_K)^T / sqrt(head_dim)``.

    Args:
        x: ``(L, E)``; w_q, w_k: ``(T, E, head_dim)`` (one head per target).

    Returns:
        ``(T, L, L)``; each of rank at most ``head_dim``.
    """
    queries = x @ w_q  # (T, L, head_dim)
    keys = x @ w_k  # (T, L, head_dim)
    return queries @ keys.transpose(-2, -1) / math.sqrt(w_q.shape[-1])  # (T, L, L)


def kl_divergence(target: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """``KL(target || softmax(scores))`` in nats, averaged over the rows of each pattern.

    Args:
        target: ``(T, L, L)`` row-stochastic, positive; scores: ``(T, L, L)``.

    Returns:
        ``(T,)``, non-negative.
    """
    log_fitted = scores.log_softmax(dim=-1)  # (T, L, L)
    per_row = (target * (target.log() - log_fitted)).sum(dim=-1)  # (T, L)
    return per_row.mean(dim=-1)  # (T,)


def fit_closed_form(
    x: torch.Tensor, targets: torch.Tensor, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``W_Q, W_K`` whose scores are the best rank-``head_dim`` fit of the centred log targets.

    ``log P`` minus its row means is truncated to rank ``head_dim`` by SVD (``S_d``); then
    ``M = sqrt(head_dim) X^+ S_d X^{+T}`` satisfies ``X M X^T / sqrt(head_dim) = S_d`` when ``X``
    has rank ``L``, and ``M = W_Q W_K^T`` is split by its own SVD.

    Args:
        x: ``(L, E)`` inputs; targets: ``(T, L, L)``; head_dim: the head's width ``d``.

    Returns:
        ``w_q``, ``w_k``: ``(T, E, head_dim)`` float64.

    Raises:
        ValueError: ``head_dim`` is not in ``1 .. E``.
    """
    embed_dim = x.shape[1]
    if not 1 <= head_dim <= embed_dim:
        raise ValueError(f"head_dim must be in 1..{embed_dim} (the width of x), got {head_dim}")
    log_p = targets.log()  # (T, L, L)
    centred = log_p - log_p.mean(dim=-1, keepdim=True)  # (T, L, L) same softmax
    u, s, vh = torch.linalg.svd(centred)  # (T, L, L), (T, L), (T, L, L)
    k = min(head_dim, s.shape[-1])
    truncated = u[..., :k] * s[..., None, :k] @ vh[..., :k, :]  # (T, L, L) rank <= k
    x_pinv = torch.linalg.pinv(x)  # (E, L)
    m = math.sqrt(head_dim) * x_pinv @ truncated @ x_pinv.T  # (T, E, E) rank <= k
    u_m, s_m, vh_m = torch.linalg.svd(m)  # (T, E, E), (T, E), (T, E, E)
    root = s_m[..., :head_dim].sqrt()  # (T, head_dim)
    w_q = u_m[..., :head_dim] * root[..., None, :]  # (T, E, head_dim)
    w_k = vh_m[..., :head_dim, :].transpose(-2, -1) * root[..., None, :]  # (T, E, head_dim)
    return w_q, w_k


def fit_descent(
    x: torch.Tensor,
    targets: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    steps: int = 300,
    lr: float = 0.02,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Refine ``W_Q, W_K`` by Adam on the KL divergence (one thread, deterministic).

    Each target keeps the best parameters seen (the starting point included), so the result is
    never worse than the start.

    Args:
        x: ``(L, E)``; targets: ``(T, L, L)``; w_q, w_k: ``(T, E, head_dim)`` starting points.
        steps, lr: Adam steps and learning rate.

    Returns:
        the refined ``w_q``, ``w_k`` (new tensors), ``(T, E, head_dim)``.
    """
    best_q, best_k = w_q.detach().clone(), w_k.detach().clone()  # (T, E, head_dim) each
    best_kl = torch.full((targets.shape[0],), math.inf, dtype=targets.dtype)  # (T,)
    with _reproducible():
        w_q = w_q.detach().clone().requires_grad_(True)  # (T, E, head_dim)
        w_k = w_k.detach().clone().requires_grad_(True)  # (T, E, head_dim)
        optimizer = torch.optim.Adam([w_q, w_k], lr=lr)
        for step in range(steps + 1):
            kl = kl_divergence(targets, head_scores(x, w_q, w_k))  # (T,) one fit per target
            better = kl.detach() < best_kl  # (T,)
            best_kl = torch.where(better, kl.detach(), best_kl)  # (T,)
            best_q[better] = w_q.detach()[better]  # (n, E, head_dim)
            best_k[better] = w_k.detach()[better]  # (n, E, head_dim)
            if step == steps:
                break
            optimizer.zero_grad()
            kl.sum().backward()
            optimizer.step()
    return best_q, best_k


# ------------------------------------------------------------------------------------------------


@dataclass
class LowRankSweep:
    """KL of the best fits found, per ``head_dim`` (:func:`low_rank_sweep`).

    Attributes:
        head_dims: the widths tried.
        seq_len: ``L``; embed_dim: ``E``.
        kl_closed_form, kl_descent: mean KL (nats) over the targets, one per ``head_dim``.
        score_rank: the largest rank of a fitted score matrix, one per ``head_dim``.
        targets: ``(T, L, L)``; fitted: ``head_dim -> (L, L)`` the fitted pattern of target 0.
    """

    head_dims: list[int]
    seq_len: int
    embed_dim: int
    kl_closed_form: list[float]
    kl_descent: list[float]
    score_rank: list[int]
    targets: torch.Tensor
    fitted: dict[int, torch.Tensor]


def low_rank_sweep(
    head_dims: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64),
    *,
    seq_len: int = 32,
    embed_dim: int = 64,
    num_targets: int = 8,
    sharpness: float = 3.0,
    steps: int = 300,
    seed: int = 0,
) -> LowRankSweep:
    """Fit every target with one head of each width; see the module docstring.

    Args:
        head_dims: widths to try (each at most ``embed_dim``).
        seq_len, embed_dim: ``L`` keys and queries; width of the fixed inputs.
        num_targets, sharpness: the targets of :func:`make_targets`.
        steps: Adam steps of :func:`fit_descent` after the closed form.
        seed: inputs use ``seed``, targets ``seed + 1``.

    Returns:
        a :class:`LowRankSweep`; KLs rounded to 6 decimals. Cached on disk when
        ``MHA_REF_CACHE_DIR`` is set.
    """
    arguments = dict(
        head_dims=tuple(head_dims),
        seq_len=seq_len,
        embed_dim=embed_dim,
        num_targets=num_targets,
        sharpness=sharpness,
        steps=steps,
        seed=seed,
    )
    return cached("low_rank_sweep", arguments, lambda: _low_rank_sweep(**arguments))


def _low_rank_sweep(
    head_dims: tuple[int, ...],
    seq_len: int,
    embed_dim: int,
    num_targets: int,
    sharpness: float,
    steps: int,
    seed: int,
) -> LowRankSweep:
    x = make_inputs(seq_len, embed_dim, seed)  # (L, E)
    targets = make_targets(num_targets, seq_len, sharpness, seed + 1)  # (T, L, L)
    kl_closed, kl_descent, ranks, fitted = [], [], [], {}
    for head_dim in head_dims:
        w_q, w_k = fit_closed_form(x, targets, head_dim)  # (T, E, d) each
        kl_closed.append(round(float(kl_divergence(targets, head_scores(x, w_q, w_k)).mean()), 6))
        w_q, w_k = fit_descent(x, targets, w_q, w_k, steps=steps)  # (T, E, d) each
        scores = head_scores(x, w_q, w_k)  # (T, L, L)
        kl_descent.append(round(float(kl_divergence(targets, scores).mean()), 6))
        ranks.append(int(torch.linalg.matrix_rank(scores).max()))
        fitted[head_dim] = scores[0].softmax(dim=-1)  # (L, L)
    return LowRankSweep(
        head_dims=list(head_dims),
        seq_len=seq_len,
        embed_dim=embed_dim,
        kl_closed_form=kl_closed,
        kl_descent=kl_descent,
        score_rank=ranks,
        targets=targets,
        fitted=fitted,
    )
