"""scaled_dot_product_attention step by step, split_heads / merge_heads, dropout."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mha_ref import (
    allowed_to_additive,
    causal_mask,
    merge_heads,
    repeat_kv_heads,
    scaled_dot_product_attention,
    split_heads,
)

# ----------------------------------------------------------------------------------------------
# Values computed by hand
# ----------------------------------------------------------------------------------------------


def test_two_keys_by_hand():
    # One query (1, 0), keys (1, 0) and (0, 1), scale 1: scores (1, 0),
    # weights (e / (e + 1), 1 / (e + 1)), output = weights @ values.
    query = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    key = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    value = torch.tensor([[10.0, 0.0], [0.0, 20.0]], dtype=torch.float64)
    output, weights = scaled_dot_product_attention(
        query, key, value, scale=1.0, return_weights=True
    )
    e = math.e
    assert weights[0, 0].item() == pytest.approx(e / (e + 1), abs=1e-12)
    assert weights[0, 1].item() == pytest.approx(1 / (e + 1), abs=1e-12)
    assert output[0, 0].item() == pytest.approx(10 * e / (e + 1), abs=1e-12)
    assert output[0, 1].item() == pytest.approx(20 / (e + 1), abs=1e-12)


def test_default_scale_is_one_over_sqrt_head_dim():
    # head_dim 4: query (2, 0, 0, 0) and key (1, 0, 0, 0) give score 2 / sqrt(4) = 1.
    query = torch.tensor([[2.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    key = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    value = torch.eye(2, dtype=torch.float64)
    _, weights = scaled_dot_product_attention(query, key, value, return_weights=True)
    assert weights[0, 0].item() == pytest.approx(math.e / (math.e + 1), abs=1e-12)


def test_explicit_scale_is_used(generator):
    query = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64)
    key = torch.randn(2, 5, 4, generator=generator, dtype=torch.float64)
    value = torch.randn(2, 5, 6, generator=generator, dtype=torch.float64)
    _, weights = scaled_dot_product_attention(query, key, value, scale=0.3, return_weights=True)
    expected = torch.softmax(query @ key.transpose(-2, -1) * 0.3, dim=-1)
    torch.testing.assert_close(weights, expected, atol=1e-12, rtol=0)


def test_weights_rows_sum_to_one_and_shapes(generator):
    query = torch.randn(2, 3, 4, 8, generator=generator)
    key = torch.randn(2, 3, 6, 8, generator=generator)
    value = torch.randn(2, 3, 6, 5, generator=generator)
    output, weights = scaled_dot_product_attention(query, key, value, return_weights=True)
    assert output.shape == (2, 3, 4, 5)
    assert weights.shape == (2, 3, 4, 6)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(2, 3, 4))


def test_returns_only_output_by_default(generator):
    x = torch.randn(1, 3, 4, generator=generator)
    assert isinstance(scaled_dot_product_attention(x, x, x), torch.Tensor)


# ----------------------------------------------------------------------------------------------
# Masks
# ----------------------------------------------------------------------------------------------


def test_causal_first_query_sees_only_first_key(generator):
    x = torch.randn(1, 4, 3, generator=generator, dtype=torch.float64)
    output, weights = scaled_dot_product_attention(x, x, x, is_causal=True, return_weights=True)
    assert weights[0, 0].tolist() == [1.0, 0.0, 0.0, 0.0]
    torch.testing.assert_close(output[0, 0], x[0, 0])
    assert bool((weights[0].triu(diagonal=1) == 0).all())


def test_float_zero_one_mask_masks_nothing_it_is_added(generator):
    # A 0/1 float mask does not block: it adds 1 to some scores, which multiplies their
    # unnormalised weights by e.
    query = torch.randn(1, 1, 4, generator=generator, dtype=torch.float64)
    key = torch.randn(1, 3, 4, generator=generator, dtype=torch.float64)
    value = torch.randn(1, 3, 2, generator=generator, dtype=torch.float64)
    zero_one = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
    _, plain = scaled_dot_product_attention(query, key, value, return_weights=True)
    _, masked = scaled_dot_product_attention(
        query, key, value, attn_mask=zero_one, return_weights=True
    )
    assert bool((masked > 0).all())  # nothing is blocked
    ratio_plain = plain[0, 0, 0] / plain[0, 0, 1]
    ratio_masked = masked[0, 0, 0] / masked[0, 0, 1]
    assert (ratio_masked / ratio_plain).item() == pytest.approx(math.e, rel=1e-12)
    # The bool version of the same mask does block keys 1 and 2.
    _, blocked = scaled_dot_product_attention(
        query, key, value, attn_mask=zero_one.bool(), return_weights=True
    )
    assert blocked[0, 0].tolist() == [1.0, 0.0, 0.0]


def test_bool_and_additive_masks_agree(generator):
    query = torch.randn(2, 2, 3, 4, generator=generator, dtype=torch.float64)
    key = torch.randn(2, 2, 5, 4, generator=generator, dtype=torch.float64)
    value = torch.randn(2, 2, 5, 4, generator=generator, dtype=torch.float64)
    allowed = torch.rand(2, 1, 3, 5, generator=generator) > 0.4
    allowed[..., 0] = True
    additive = torch.zeros(allowed.shape, dtype=torch.float64).masked_fill(~allowed, -math.inf)
    torch.testing.assert_close(
        scaled_dot_product_attention(query, key, value, attn_mask=allowed),
        scaled_dot_product_attention(query, key, value, attn_mask=additive),
        atol=1e-12,
        rtol=0,
    )


def test_fully_masked_row_gives_zero_not_nan_and_does_not_leak(generator):
    query = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    key = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    value = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    allowed = torch.ones(2, 3, 3, dtype=torch.bool)
    allowed[0, 1, :] = False  # batch element 0, query 1: no key at all
    output, weights = scaled_dot_product_attention(
        query, key, value, attn_mask=allowed, return_weights=True
    )
    assert weights[0, 1].tolist() == [0.0, 0.0, 0.0]
    assert output[0, 1].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert not bool(output.isnan().any())
    # The other rows and the other batch element are those of an unmasked computation.
    unmasked = scaled_dot_product_attention(query, key, value)
    torch.testing.assert_close(output[1], unmasked[1], atol=1e-12, rtol=0)
    torch.testing.assert_close(output[0, [0, 2]], unmasked[0, [0, 2]], atol=1e-12, rtol=0)
    # Gradients are finite, and the masked row sends no gradient into its query.
    output.sum().backward()
    for tensor in (query, key, value):
        assert bool(torch.isfinite(tensor.grad).all())
    assert query.grad[0, 1].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_fully_masked_row_matches_torch_sdpa_zero(generator):
    # Documented behaviour of the pinned torch: F.scaled_dot_product_attention also gives 0.
    query = torch.randn(1, 2, 3, 4, generator=generator)
    allowed = torch.ones(3, 3, dtype=torch.bool)
    allowed[2] = False
    theirs = F.scaled_dot_product_attention(query, query, query, attn_mask=allowed)
    ours = scaled_dot_product_attention(query, query, query, attn_mask=allowed)
    assert theirs[..., 2, :].abs().max().item() == 0.0
    torch.testing.assert_close(ours, theirs)


def test_float_mask_of_other_dtype_is_cast(generator):
    query = torch.randn(1, 3, 4, generator=generator, dtype=torch.float64)
    mask32 = torch.randn(3, 3, generator=generator)
    ours = scaled_dot_product_attention(query, query, query, attn_mask=mask32)
    expected = scaled_dot_product_attention(query, query, query, attn_mask=mask32.double())
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, expected, atol=1e-12, rtol=0)


# ----------------------------------------------------------------------------------------------
# Grouped-query attention
# ----------------------------------------------------------------------------------------------


def test_repeat_kv_heads_groups_consecutive_query_heads(generator):
    key = torch.randn(1, 2, 3, 4, generator=generator)
    value = torch.randn(1, 2, 3, 4, generator=generator)
    key_rep, value_rep = repeat_kv_heads(key, value, num_heads=6)
    assert key_rep.shape == (1, 6, 3, 4)
    for head in range(6):
        assert torch.equal(key_rep[0, head], key[0, head // 3])
        assert torch.equal(value_rep[0, head], value[0, head // 3])


def test_enable_gqa_equals_explicit_repeat(generator):
    query = torch.randn(2, 4, 3, 5, generator=generator, dtype=torch.float64)
    key = torch.randn(2, 2, 6, 5, generator=generator, dtype=torch.float64)
    value = torch.randn(2, 2, 6, 3, generator=generator, dtype=torch.float64)
    grouped = scaled_dot_product_attention(query, key, value, enable_gqa=True)
    expected = scaled_dot_product_attention(
        query, key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1)
    )
    torch.testing.assert_close(grouped, expected, atol=1e-12, rtol=0)


# ----------------------------------------------------------------------------------------------
# Dropout
# ----------------------------------------------------------------------------------------------


def test_dropout_zero_fraction_and_rescaling():
    torch.manual_seed(0)
    p = 0.3
    query = torch.zeros(4, 8, 64, 2)  # all scores 0 -> every weight is 1/64
    value = torch.randn(4, 8, 64, 2)
    _, weights = scaled_dot_product_attention(
        query, query, value, dropout_p=p, return_weights=True
    )
    zero_fraction = (weights == 0).float().mean().item()
    n = weights.numel()  # 131072 weights; std of the fraction is sqrt(p (1 - p) / n) ~ 0.0013
    assert abs(zero_fraction - p) < 5 * math.sqrt(p * (1 - p) / n)
    survivors = weights[weights != 0]
    torch.testing.assert_close(survivors, torch.full_like(survivors, 1 / 64 / (1 - p)))


def test_dropout_matches_torch_with_same_seed(generator):
    # Same RNG draw as F.scaled_dot_product_attention's math path.
    query = torch.randn(2, 2, 4, 8, generator=generator)
    torch.manual_seed(7)
    theirs = F.scaled_dot_product_attention(query, query, query, dropout_p=0.4)
    torch.manual_seed(7)
    ours = scaled_dot_product_attention(query, query, query, dropout_p=0.4)
    torch.testing.assert_close(ours, theirs)


def test_no_dropout_is_deterministic(generator):
    x = torch.randn(2, 3, 4, generator=generator)
    assert torch.equal(scaled_dot_product_attention(x, x, x), scaled_dot_product_attention(x, x, x))


# ----------------------------------------------------------------------------------------------
# split_heads / merge_heads
# ----------------------------------------------------------------------------------------------


def test_split_heads_layout(generator):
    x = torch.randn(2, 5, 12, generator=generator)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    # head h holds features h*4 ... h*4+3 of every token
    assert torch.equal(heads[1, 2, 3], x[1, 3, 8:12])
    assert torch.equal(heads, x.view(2, 5, 3, 4).transpose(1, 2))


def test_merge_heads_inverts_split_heads(generator):
    x = torch.randn(2, 5, 12, generator=generator)
    assert torch.equal(merge_heads(split_heads(x, 4)), x)


def test_split_heads_on_non_contiguous_input(generator):
    channels_first = torch.randn(2, 12, 5, generator=generator)  # (batch, embed_dim, seq_len)
    x = channels_first.transpose(1, 2)  # (batch, seq_len, embed_dim), not contiguous
    assert not x.is_contiguous()
    heads = split_heads(x, 3)
    assert heads[1, 2, 4].tolist() == channels_first[1, 8:12, 4].tolist()
    assert torch.equal(heads, x.contiguous().view(2, 5, 3, 4).transpose(1, 2))


def test_merge_heads_after_transpose_where_view_fails(generator):
    heads = torch.randn(2, 3, 5, 4, generator=generator)
    with pytest.raises(RuntimeError):
        heads.transpose(1, 2).view(2, 5, 12)
    merged = merge_heads(heads)
    assert torch.equal(merged, heads.transpose(1, 2).contiguous().view(2, 5, 12))


def test_causal_mask_with_sdpa_equals_is_causal(generator):
    x = torch.randn(2, 2, 5, 4, generator=generator)
    torch.testing.assert_close(
        scaled_dot_product_attention(x, x, x, attn_mask=causal_mask(5)),
        scaled_dot_product_attention(x, x, x, is_causal=True),
    )


# ----------------------------------------------------------------------------------------------
# What F.scaled_dot_product_attention accepts, mha_ref accepts and computes the same
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.0, -1.0, -0.3, True, False, 2, torch.tensor(0.5)])
def test_sdpa_accepts_every_finite_scale_like_torch(scale, generator):
    query = torch.randn(2, 3, 4, generator=generator)
    key = torch.randn(2, 5, 4, generator=generator)
    value = torch.randn(2, 5, 4, generator=generator)
    expected = F.scaled_dot_product_attention(query, key, value, scale=scale)
    actual = scaled_dot_product_attention(query, key, value, scale=scale)
    torch.testing.assert_close(actual, expected)


def test_sdpa_zero_scale_gives_uniform_weights(generator):
    query, key = torch.randn(3, 4, generator=generator), torch.randn(5, 4, generator=generator)
    _, weights = scaled_dot_product_attention(query, key, key, scale=0.0, return_weights=True)
    torch.testing.assert_close(weights, torch.full((3, 5), 0.2))


@pytest.mark.parametrize("dropout_p", [1.0, True])
def test_sdpa_dropout_one_zeroes_everything_like_torch(dropout_p, generator):
    x = torch.randn(2, 3, 4, generator=generator)
    expected = F.scaled_dot_product_attention(x, x, x, dropout_p=dropout_p)
    actual = scaled_dot_product_attention(x, x, x, dropout_p=dropout_p)
    assert torch.equal(actual, expected) and not actual.any()


def test_sdpa_head_dim_zero_like_torch(generator):
    query, key = torch.randn(1, 2, 3, 0), torch.randn(1, 2, 5, 0)
    value = torch.randn(1, 2, 5, 4, generator=generator)
    expected = F.scaled_dot_product_attention(query, key, value)
    torch.testing.assert_close(scaled_dot_product_attention(query, key, value), expected)


def test_sdpa_gqa_with_different_key_and_value_heads_like_torch(generator):
    query = torch.randn(1, 4, 3, 4, generator=generator)
    key = torch.randn(1, 2, 5, 4, generator=generator)
    value = torch.randn(1, 1, 5, 4, generator=generator)
    expected = F.scaled_dot_product_attention(query, key, value, enable_gqa=True)
    actual = scaled_dot_product_attention(query, key, value, enable_gqa=True)
    torch.testing.assert_close(actual, expected)


def test_sdpa_float16_scores_beyond_65504_are_exact_like_torch(generator):
    """200 * 200 * 8 / sqrt(8) = 113137 does not fit in float16; torch computes in float32."""
    query = torch.full((1, 1, 2, 8), 200.0, dtype=torch.float16)
    value = torch.randn(1, 1, 2, 8, generator=generator).half()
    expected = F.scaled_dot_product_attention(query, query, value)
    actual, weights = scaled_dot_product_attention(query, query, value, return_weights=True)
    assert actual.dtype == weights.dtype == torch.float16
    assert not actual.isnan().any()
    torch.testing.assert_close(actual, expected)


def test_sdpa_large_scale_split_onto_query_and_key_like_torch_math():
    """scale=1e38 on |q| = 5: q * 1e38 overflows float32, q * sqrt(1e38) does not."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    query = torch.full((1, 1, 2, 4), 5.0)
    key = torch.full((1, 1, 3, 4), 1e-3)
    key[..., 0, :] = -1e-3
    value = torch.arange(12.0).reshape(1, 1, 3, 4)
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(query, key, value, scale=1e38)
    actual = scaled_dot_product_attention(query, key, value, scale=1e38)
    assert not expected.isnan().any()
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("float_mask", [False, True])
def test_sdpa_mask_with_is_causal_applies_both_like_torch(float_mask, generator):
    """torch's default CPU kernel (4-D inputs) applies attn_mask and the causal triangle."""
    x = torch.randn(1, 2, 4, 4, generator=generator)
    allowed = torch.rand(4, 4, generator=generator) > 0.5
    allowed.fill_diagonal_(True)
    mask = allowed_to_additive(allowed) if float_mask else allowed
    expected = F.scaled_dot_product_attention(x, x, x, attn_mask=mask, is_causal=True)
    both = F.scaled_dot_product_attention(x, x, x, attn_mask=allowed & causal_mask(4))
    torch.testing.assert_close(expected, both)
    actual = scaled_dot_product_attention(x, x, x, attn_mask=mask, is_causal=True)
    torch.testing.assert_close(actual, expected)


def test_sdpa_mask_with_is_causal_on_3d_inputs_listed_difference(generator):
    """Listed difference: for 3-D inputs torch's math backend raises; mha_ref applies both."""
    x = torch.randn(2, 4, 4, generator=generator)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
        F.scaled_dot_product_attention(x, x, x, attn_mask=causal_mask(4), is_causal=True)
    actual = scaled_dot_product_attention(x, x, x, attn_mask=causal_mask(4), is_causal=True)
    torch.testing.assert_close(actual, F.scaled_dot_product_attention(x, x, x, is_causal=True))


@pytest.mark.parametrize("scale", [float("inf"), float("nan")])
def test_sdpa_non_finite_scale_raises_where_torch_returns_garbage(scale, generator):
    """Listed difference: torch returns NaN for scale=inf and zeros for scale=nan."""
    x = torch.randn(1, 2, 3, 4, generator=generator)
    result = F.scaled_dot_product_attention(x, x, x, scale=scale)
    assert result.isnan().any() or not result.any()
    with pytest.raises(ValueError, match="finite"):
        scaled_dot_product_attention(x, x, x, scale=scale)


def test_sdpa_zero_scale_with_is_causal_is_uniform_where_torch_cpu_kernel_gives_nan():
    """A listed difference: torch's default CPU kernel multiplies the blocked (-inf) scores by
    scale=0 and returns NaN; its math backend, like mha_ref, gives uniform weights."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 1, 1, generator=generator, dtype=torch.float64)
    k = torch.randn(1, 1, 2, 1, generator=generator, dtype=torch.float64)
    v = torch.randn(1, 1, 2, 1, generator=generator, dtype=torch.float64)
    ours = scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.0)
    assert ours.item() == v[0, 0, 0, 0].item()  # query 0 sees key 0 only
    assert F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.0).isnan().all()
    with sdpa_kernel(SDPBackend.MATH):
        math = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.0)
    torch.testing.assert_close(ours, math)


@pytest.mark.parametrize("scale", [-0.5, -3.0])
def test_sdpa_negative_scale_with_is_causal_is_the_formula_where_torch_cpu_kernel_gives_nan(
    scale,
):
    """The same listed difference for a negative scale: the kernel's -inf * scale is +inf."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 3, generator=generator, dtype=torch.float64) for _ in "qkv")
    ours = scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    allowed = torch.ones(4, 4, dtype=torch.bool).tril()
    formula = torch.softmax((q @ k.transpose(-2, -1) * scale).masked_fill(~allowed, -math.inf), -1)
    torch.testing.assert_close(ours, formula @ v)
    assert F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale).isnan().any()
    with sdpa_kernel(SDPBackend.MATH):
        math_backend = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    torch.testing.assert_close(ours, math_backend)
