"""Bad input to the real-model and sliding-window lab functions is a clear error, not a wrong
number: each call here once returned a silent result (a mask that ignored the window, the
identity, NaN) or a raw torch error."""

from __future__ import annotations

import pytest
import torch

from mha_ref.tutorial import windows
from mha_ref.tutorial.smollm2 import heads


def test_window_mask_and_receptive_field_refuse_negative_counts():
    with pytest.raises(ValueError, match="num_sinks .* must be a non-negative integer"):
        windows.window_mask(5, 2, num_sinks=-1)
    with pytest.raises(ValueError, match="depth .* must be a non-negative integer"):
        windows.receptive_field(5, 2, depth=-1)
    with pytest.raises(TypeError, match="depth must be an int"):
        windows.receptive_field(5, 2, depth=1.5)
    # the valid calls still give what they did: 1 sink + a window of 2 over 5 tokens
    mask = windows.window_mask(5, 2, num_sinks=1)  # (5, 5)
    assert mask[4].tolist() == [True, False, False, True, True]
    assert torch.equal(windows.receptive_field(5, 2, depth=0), torch.eye(5, dtype=torch.bool))


def test_random_repeated_tokens_needs_ordinary_tokens():
    with pytest.raises(ValueError, match="vocab_size must be above 17"):
        heads.random_repeated_tokens(3, vocab_size=10)
    tokens = heads.random_repeated_tokens(3, vocab_size=20)  # (1, 6)
    assert tokens.shape[-1] == 6 and int(tokens.min()) >= 17 and int(tokens.max()) < 20


def test_induction_and_duplicate_scores_check_the_weights_shape():
    weights = torch.full((1, 2, 6, 6), 1 / 6)  # (batch, heads, 2 * 3, 2 * 3)
    with pytest.raises(ValueError, match=r"\(\.\.\., 10, 10\) for half_len=5, got shape"):
        heads.induction_scores(weights, 5)
    with pytest.raises(ValueError, match="got shape"):
        heads.duplicate_token_scores(weights[0], 3)  # (heads, 6, 6): no batch dimension
    assert torch.allclose(heads.induction_scores(weights, 3), torch.full((2,), 1 / 6))


@pytest.mark.parametrize("num_kv_heads", [3, 4, 0])
def test_group_similarities_refuses_groups_that_do_not_divide_the_heads(num_kv_heads):
    with pytest.raises(ValueError, match="num_kv_heads a divisor of num_heads"):
        heads.group_similarities(torch.eye(4), num_kv_heads)


def test_group_similarities_value():
    similarity = torch.tensor([[1.0, 0.8, 0.1, 0.2], [0.8, 1.0, 0.3, 0.4],
                               [0.1, 0.3, 1.0, 0.6], [0.2, 0.4, 0.6, 1.0]])  # (4, 4)
    within, across = heads.group_similarities(similarity, 2)
    assert within == pytest.approx((0.8 + 0.6) / 2) and across == pytest.approx(0.25)
