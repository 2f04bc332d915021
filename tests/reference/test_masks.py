"""Mask builders and the two boolean conventions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mha_ref import (
    MultiHeadAttention,
    allowed_to_additive,
    allowed_to_blocked,
    blocked_to_allowed,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)


def test_causal_mask_square_is_lower_triangle_with_diagonal():
    expected = torch.tensor(
        [
            [True, False, False, False],
            [True, True, False, False],
            [True, True, True, False],
            [True, True, True, True],
        ]
    )
    assert causal_mask(4).dtype == torch.bool
    assert torch.equal(causal_mask(4), expected)


def test_causal_mask_is_complement_of_textbook_triu_diagonal_1():
    # The textbook stores the *blocked* positions: torch.triu(ones, diagonal=1).
    blocked = torch.triu(torch.ones(6, 6), diagonal=1).bool()
    assert torch.equal(causal_mask(6), ~blocked)
    # diagonal=0 would also block the diagonal: each token could not see itself.
    assert not torch.equal(causal_mask(6), ~torch.triu(torch.ones(6, 6), diagonal=0).bool())


def test_causal_mask_alignments_differ_when_query_shorter():
    top_left = causal_mask(2, 4, alignment="top_left")
    bottom_right = causal_mask(2, 4, alignment="bottom_right")
    assert torch.equal(top_left, torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0]]).bool())
    assert torch.equal(bottom_right, torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]).bool())


def test_bottom_right_equals_last_rows_of_full_causal_mask():
    # KV cache: the 3 newest queries against all 7 keys are the last 3 rows of the 7x7 mask.
    full = causal_mask(7)
    assert torch.equal(causal_mask(3, 7, alignment="bottom_right"), full[-3:])


def test_bottom_right_with_more_queries_than_keys_leaves_empty_rows():
    mask = causal_mask(4, 2, alignment="bottom_right")
    assert mask.sum(dim=-1).tolist() == [0, 0, 1, 2]


def test_torch_is_causal_uses_top_left_alignment(generator):
    query = torch.randn(1, 2, 3, 4, generator=generator)
    key = torch.randn(1, 2, 5, 4, generator=generator)
    value = torch.randn(1, 2, 5, 4, generator=generator)
    theirs = F.scaled_dot_product_attention(query, key, value, is_causal=True)
    top_left = scaled_dot_product_attention(query, key, value, attn_mask=causal_mask(3, 5))
    bottom_right = scaled_dot_product_attention(
        query, key, value, attn_mask=causal_mask(3, 5, alignment="bottom_right")
    )
    torch.testing.assert_close(theirs, top_left)
    assert (theirs - bottom_right).abs().max() > 1e-3


@pytest.mark.parametrize("alignment", ["top_left", "bottom_right"])
@pytest.mark.parametrize(("query_len", "key_len"), [(0, 0), (0, 4), (3, 0)])
def test_causal_mask_of_empty_sequences_is_empty(query_len, key_len, alignment):
    mask = causal_mask(query_len, key_len, alignment=alignment)
    assert mask.shape == (query_len, key_len) and mask.dtype == torch.bool
    assert mask.numel() == 0


def test_causal_mask_accepts_numpy_lengths():
    assert torch.equal(causal_mask(np.int64(3), np.int32(4)), causal_mask(3, 4))


def test_causal_mask_device_argument():
    assert causal_mask(3, device="meta").device.type == "meta"


def test_padding_mask_marks_real_tokens():
    mask = padding_mask([3, 1, 0], max_len=4)
    expected = torch.tensor(
        [[True, True, True, False], [True, False, False, False], [False, False, False, False]]
    )
    assert torch.equal(mask, expected)


def test_padding_mask_default_max_len_is_longest():
    assert padding_mask(torch.tensor([2, 5])).shape == (2, 5)


def test_polarity_conversions_are_inverses():
    allowed = causal_mask(3, 4)
    blocked = allowed_to_blocked(allowed)
    assert torch.equal(blocked, ~allowed)
    assert torch.equal(blocked_to_allowed(blocked), allowed)


def test_float_masks_pass_through_conversions_unchanged():
    additive = torch.tensor([[0.0, -math.inf], [0.5, 0.0]])
    assert allowed_to_blocked(additive) is additive
    assert blocked_to_allowed(additive) is additive


def test_allowed_to_additive_values_and_dtype():
    additive = allowed_to_additive(torch.tensor([True, False]), dtype=torch.float64)
    assert additive.dtype == torch.float64
    assert additive[0].item() == 0.0
    assert additive[1].item() == -math.inf


def test_same_mask_in_both_apis_gives_same_result(generator):
    """The polarity table: SDPA True = may attend, nn.MultiheadAttention True = blocked."""
    torch.manual_seed(0)
    torch_mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 5, 8, generator=generator)
    lengths = [5, 3]
    allowed_keys = padding_mask(lengths)  # (2, 5), True = real token
    theirs, _ = torch_mha(x, x, x, key_padding_mask=allowed_to_blocked(allowed_keys))

    # Same computation through the SDPA convention: project, split, attend, merge, project.
    w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)

    def heads(t):
        return t.view(2, 5, 2, 4).transpose(1, 2)

    q = heads(F.linear(x, w_q, b_q))
    k = heads(F.linear(x, w_k, b_k))
    v = heads(F.linear(x, w_v, b_v))
    context = scaled_dot_product_attention(q, k, v, attn_mask=allowed_keys[:, None, None, :])
    ours = torch_mha.out_proj(context.transpose(1, 2).reshape(2, 5, 8))
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-6)

    # Passing the SDPA-style mask unchanged to the MHA API means the opposite: sequence 1
    # then attends only to its two padding tokens, and sequence 0 (no padding) to nothing.
    wrong, _ = torch_mha(x, x, x, key_padding_mask=allowed_keys)
    assert (wrong[1] - theirs[1]).abs().max() > 1e-3
    assert bool(wrong[0].isnan().all())  # torch: all keys blocked -> NaN


def test_our_mha_uses_blocked_convention_like_torch(generator):
    torch.manual_seed(1)
    torch_mha = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    ours = MultiHeadAttention.from_torch(torch_mha)
    x = torch.randn(1, 4, 4, generator=generator)
    blocked = allowed_to_blocked(causal_mask(4))
    torch.testing.assert_close(ours(x, x, x, attn_mask=blocked)[0],
                               torch_mha(x, x, x, attn_mask=blocked)[0])


@pytest.mark.parametrize("alignment", ["top_left", "bottom_right"])
def test_every_row_of_square_causal_mask_allows_its_own_position(alignment):
    mask = causal_mask(5, alignment=alignment)
    assert bool(mask.diagonal().all())


def test_padding_mask_of_empty_list_is_an_empty_batch():
    assert padding_mask([]).shape == (0, 0)
    assert padding_mask([], max_len=3).shape == (0, 3)
