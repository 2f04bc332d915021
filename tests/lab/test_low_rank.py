"""Tests for mha_ref.tutorial.low_rank: the rank bound and the KL of the best narrow head."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mha_ref.tutorial import low_rank
from mha_ref.tutorial.cache import CACHE_ENV_VAR

CACHE = Path(__file__).resolve().parents[2] / "build" / ".cache" / "experiments"


@pytest.fixture(scope="module")
def sweep():
    """The sweep of example 12: from the docs build's cache, else computed (about 5 s)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV_VAR, str(CACHE))
        return low_rank.low_rank_sweep(
            head_dims=(1, 2, 4, 8, 16, 31, 32, 64), seq_len=32, embed_dim=64
        )


def test_targets_are_row_stochastic_and_positive():
    targets = low_rank.make_targets(3, 10, sharpness=3.0)  # (3, 10, 10)
    assert targets.shape == (3, 10, 10) and (targets > 0).all()
    torch.testing.assert_close(targets.sum(-1), torch.ones(3, 10, dtype=torch.float64))
    with pytest.raises(ValueError, match="sharpness"):
        low_rank.make_targets(1, 4, sharpness=0.0)


@pytest.mark.parametrize("head_dim", [1, 3, 7])
def test_score_rank_is_at_most_head_dim(head_dim):
    x = low_rank.make_inputs(12, 16)  # (L, E)
    generator = torch.Generator().manual_seed(0)
    w_q = torch.randn(2, 16, head_dim, generator=generator, dtype=torch.float64)  # (T, E, d)
    w_k = torch.randn(2, 16, head_dim, generator=generator, dtype=torch.float64)  # (T, E, d)
    scores = low_rank.head_scores(x, w_q, w_k)  # (T, L, L)
    assert torch.linalg.matrix_rank(scores).tolist() == [head_dim, head_dim]


def test_closed_form_is_exact_once_head_dim_reaches_seq_len():
    x = low_rank.make_inputs(8, 12)  # (L, E)
    targets = low_rank.make_targets(2, 8)  # (T, L, L)
    w_q, w_k = low_rank.fit_closed_form(x, targets, head_dim=8)  # (T, E, 8) each
    assert w_q.shape == (2, 12, 8)
    kl = low_rank.kl_divergence(targets, low_rank.head_scores(x, w_q, w_k))  # (T,)
    assert kl.max() < 1e-10
    fitted = low_rank.head_scores(x, w_q, w_k).softmax(-1)  # (T, L, L)
    torch.testing.assert_close(fitted, targets, rtol=0, atol=1e-10)


def test_closed_form_is_exact_already_at_seq_len_minus_one():
    x = low_rank.make_inputs(8, 12)  # (L, E)
    targets = low_rank.make_targets(2, 8)  # (T, L, L)
    for head_dim, exact in ((6, False), (7, True)):
        w_q, w_k = low_rank.fit_closed_form(x, targets, head_dim=head_dim)
        kl = low_rank.kl_divergence(targets, low_rank.head_scores(x, w_q, w_k))  # (T,)
        assert (kl.max() < 1e-10) == exact, head_dim


def test_bad_head_dim_is_rejected():
    with pytest.raises(ValueError, match="head_dim"):
        low_rank.fit_closed_form(low_rank.make_inputs(4, 6), low_rank.make_targets(1, 4), 7)


def test_descent_never_ends_worse_than_its_start():
    x = low_rank.make_inputs(8, 12)
    targets = low_rank.make_targets(3, 8)
    start = low_rank.fit_closed_form(x, targets, head_dim=2)
    refined = low_rank.fit_descent(x, targets, *start, steps=20)
    before = low_rank.kl_divergence(targets, low_rank.head_scores(x, *start))  # (T,)
    after = low_rank.kl_divergence(targets, low_rank.head_scores(x, *refined))  # (T,)
    assert (after <= before).all()


def test_kl_falls_with_head_dim_and_vanishes_at_seq_len(sweep):
    ranks, head_dims = sweep.score_rank, sweep.head_dims
    assert all(r <= min(d, sweep.seq_len) for r, d in zip(ranks, head_dims, strict=True))
    assert ranks[:6] == head_dims[:6]  # up to L - 1 a fitted head uses its full rank
    assert ranks[5:] == [sweep.seq_len - 1] * 3  # centred rows: never more than L - 1
    for kls in (sweep.kl_closed_form, sweep.kl_descent):
        assert all(a > b for a, b in zip(kls[:5], kls[1:5], strict=False))  # strictly falling
        assert max(kls[5:]) < 1e-6  # head_dim >= L - 1: exact
    assert all(g <= c for g, c in zip(sweep.kl_descent, sweep.kl_closed_form, strict=True))
    assert sweep.kl_descent[0] > 0.5  # head_dim = 1: far from every target
    assert sweep.kl_descent[3] > 0.02  # head_dim = 8 < L: still measurably off
