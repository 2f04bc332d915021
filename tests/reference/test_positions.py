"""Rotary position embedding and ALiBi: properties, not copied numbers.

RoPE: the scores depend on the offset between query and key alone; the rotation keeps norms;
the two pairings compute the same attention after the row permutation; an attention layer with
RoPE decodes step by step exactly as it attends to the whole sequence; bad input is refused
with a message that names the argument. ALiBi: the slopes follow the paper's formula, for 8
heads and for a head count that is not a power of two; the bias is an additive mask.
"""

from __future__ import annotations

import math

import pytest
import torch

from mha_ref import (
    GroupedQueryAttention,
    RotaryEmbedding,
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    causal_mask,
    rope_pairing_permutation,
    rotary_frequencies,
    scaled_dot_product_attention,
)

PAIRINGS = ("adjacent", "half")


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------------------------
# RoPE: properties
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pairing", PAIRINGS)
@pytest.mark.parametrize("rotary_dim", [None, 8])
def test_rope_scores_depend_only_on_the_offset(pairing, rotary_dim):
    """Shift every position by the same amount: the scores do not change."""
    g = _generator(1)
    q = torch.randn(2, 3, 7, 16, generator=g, dtype=torch.float64)  # (batch, heads, L, hd)
    k = torch.randn(2, 3, 7, 16, generator=g, dtype=torch.float64)
    positions = torch.arange(7)
    kwargs = {"pairing": pairing, "rotary_dim": rotary_dim, "base": 100.0}
    scores = apply_rotary(q, positions, **kwargs) @ apply_rotary(k, positions, **kwargs).mT
    for shift in (1, 13, 1000):
        shifted = apply_rotary(q, positions + shift, **kwargs) @ apply_rotary(
            k, positions + shift, **kwargs
        ).mT
        torch.testing.assert_close(shifted, scores, rtol=1e-10, atol=1e-10)
    # and the rotation does change them: the scores are not those without positions
    assert (scores - q @ k.mT).abs().max() > 0.1


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_rope_score_is_a_function_of_the_offset(pairing):
    """q at position i, k at j: the score equals that of q at i - j and k at 0."""
    g = _generator(2)
    q, k = torch.randn(2, 1, 32, generator=g, dtype=torch.float64)
    for i, j in [(5, 2), (40, 37), (3, 0)]:
        pi, pj = torch.tensor([i]), torch.tensor([j])
        direct = apply_rotary(q, pi, pairing=pairing) @ apply_rotary(k, pj, pairing=pairing).mT
        relative = apply_rotary(q, pi - pj, pairing=pairing) @ apply_rotary(
            k, torch.tensor([0]), pairing=pairing
        ).mT
        torch.testing.assert_close(direct, relative, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_rope_preserves_norms_and_passes_unrotated_features(pairing):
    g = _generator(3)
    x = torch.randn(4, 9, 12, generator=g, dtype=torch.float64)
    positions = torch.arange(100, 109)
    rotated = apply_rotary(x, positions, pairing=pairing, rotary_dim=8)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=1e-12)
    assert torch.equal(rotated[..., 8:], x[..., 8:])  # beyond rotary_dim: untouched
    assert torch.equal(apply_rotary(x, torch.zeros(9, dtype=torch.long)), x)  # position 0


def test_rope_adjacent_pairing_rotates_neighbouring_features():
    """Pair 0 is features (0, 1) in the adjacent layout and (0, d/2) in the half layout."""
    x = torch.zeros(1, 8, dtype=torch.float64)
    x[0, 0] = 1.0
    p = torch.tensor([1])  # pair 0 turns by 1 radian
    adjacent = apply_rotary(x, p, pairing="adjacent")
    half = apply_rotary(x, p, pairing="half")
    assert adjacent[0, 0] == pytest.approx(math.cos(1.0)) and adjacent[0, 1] == pytest.approx(
        math.sin(1.0)
    )
    assert half[0, 0] == pytest.approx(math.cos(1.0)) and half[0, 4] == pytest.approx(
        math.sin(1.0)
    )
    assert half[0, 1] == 0.0 and adjacent[0, 4] == 0.0


@pytest.mark.parametrize("rotary_dim", [None, 6])
def test_the_two_pairings_agree_after_the_permutation(rotary_dim):
    g = _generator(4)
    x = torch.randn(2, 3, 5, 10, generator=g, dtype=torch.float64)
    positions = torch.arange(3, 8)
    perm = rope_pairing_permutation(10, rotary_dim)
    assert sorted(perm.tolist()) == list(range(10))
    adjacent = apply_rotary(x, positions, pairing="adjacent", rotary_dim=rotary_dim)
    half = apply_rotary(x[..., perm], positions, pairing="half", rotary_dim=rotary_dim)
    torch.testing.assert_close(half, adjacent[..., perm], rtol=1e-12, atol=1e-12)


def test_a_layer_with_permuted_rows_and_the_other_pairing_computes_the_same():
    """A checkpoint for one pairing runs with the other once its q/k rows are permuted."""
    torch.manual_seed(5)
    embed_dim, num_heads, num_kv_heads = 24, 4, 2
    head_dim = embed_dim // num_heads
    adjacent = GroupedQueryAttention(
        embed_dim, num_heads, num_kv_heads, dtype=torch.float64,
        rope=RotaryEmbedding(head_dim, max_len=32, pairing="adjacent"),
    )
    half = GroupedQueryAttention(
        embed_dim, num_heads, num_kv_heads, dtype=torch.float64,
        rope=RotaryEmbedding(head_dim, max_len=32, pairing="half"),
    )
    perm = rope_pairing_permutation(head_dim)
    state = adjacent.state_dict()
    for name, heads in (("q_proj", num_heads), ("k_proj", num_kv_heads)):
        for part in ("weight", "bias"):
            tensor = state[f"{name}.{part}"]
            rows = tensor.reshape(heads, head_dim, *tensor.shape[1:])[:, perm]
            state[f"{name}.{part}"] = rows.reshape(tensor.shape)
    half.load_state_dict(state)
    x = torch.randn(2, 11, embed_dim, dtype=torch.float64)
    out_adjacent, w_adjacent = adjacent(x, is_causal=True, need_weights=True)
    out_half, w_half = half(x, is_causal=True, need_weights=True)
    torch.testing.assert_close(out_half, out_adjacent, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(w_half, w_adjacent, rtol=1e-12, atol=1e-12)
    # and the unpermuted weights with the other pairing are a different model
    wrong = GroupedQueryAttention(
        embed_dim, num_heads, num_kv_heads, dtype=torch.float64,
        rope=RotaryEmbedding(head_dim, max_len=32, pairing="half"),
    )
    wrong.load_state_dict(adjacent.state_dict())
    assert (wrong(x, is_causal=True)[0] - out_adjacent).abs().max() > 1e-3


def test_half_layout_weights_run_with_the_adjacent_pairing_after_the_inverse_order():
    """The other direction: Hugging Face (half) rows reordered by argsort(perm) run adjacent."""
    torch.manual_seed(8)
    embed_dim, num_heads = 16, 2
    head_dim = embed_dim // num_heads
    half = GroupedQueryAttention(
        embed_dim, num_heads, num_heads, dtype=torch.float64,
        rope=RotaryEmbedding(head_dim, max_len=16, pairing="half"),
    )
    adjacent = GroupedQueryAttention(
        embed_dim, num_heads, num_heads, dtype=torch.float64,
        rope=RotaryEmbedding(head_dim, max_len=16, pairing="adjacent"),
    )
    inverse = torch.argsort(rope_pairing_permutation(head_dim))
    state = half.state_dict()
    for name in ("q_proj", "k_proj"):
        for part in ("weight", "bias"):
            tensor = state[f"{name}.{part}"]
            rows = tensor.reshape(num_heads, head_dim, *tensor.shape[1:])[:, inverse]
            state[f"{name}.{part}"] = rows.reshape(tensor.shape)
    adjacent.load_state_dict(state)
    x = torch.randn(1, 9, embed_dim, dtype=torch.float64)
    torch.testing.assert_close(
        adjacent(x, is_causal=True)[0], half(x, is_causal=True)[0], rtol=1e-12, atol=1e-12
    )


def test_an_odd_rotary_dim_of_one_suggests_two():
    with pytest.raises(ValueError, match=r"rotary_dim=1\. Use 2\."):
        apply_rotary(torch.randn(3, 4), torch.arange(3), rotary_dim=1)


def test_frequencies_follow_the_paper():
    freq = rotary_frequencies(8, base=10000.0)
    expected = torch.tensor([10000.0 ** (-2 * i / 8) for i in range(4)], dtype=torch.float64)
    torch.testing.assert_close(freq, expected)
    assert freq[0] == 1.0 and (freq.diff() < 0).all()


def test_module_table_matches_the_function_and_stays_out_of_state_dict():
    rope = RotaryEmbedding(16, max_len=64, base=500.0, rotary_dim=12, pairing="half")
    x = torch.randn(2, 3, 10, 16)
    positions = torch.arange(20, 30)
    expected = apply_rotary(x, positions, base=500.0, rotary_dim=12, pairing="half")
    torch.testing.assert_close(rope(x, positions), expected, rtol=1e-6, atol=1e-6)
    assert rope.state_dict() == {}
    per_sequence = torch.stack([positions, positions + 5])  # (batch, seq_len)
    out = rope(x, per_sequence)
    torch.testing.assert_close(out[1], rope(x[1:], positions + 5)[0], rtol=1e-6, atol=1e-6)


def test_16_bit_inputs_are_rotated_in_float32():
    x = torch.randn(1, 4, 64).to(torch.bfloat16)
    out = apply_rotary(x, torch.arange(1000, 1004), base=100000.0)
    assert out.dtype == torch.bfloat16
    reference = apply_rotary(x.double(), torch.arange(1000, 1004), base=100000.0)
    assert (out.double() - reference).abs().max() < 0.05


# ------------------------------------------------------------------------------------------------
# RoPE inside GroupedQueryAttention, and the KV cache
# ------------------------------------------------------------------------------------------------


def _rope_layer(num_kv_heads: int = 2, pairing: str = "adjacent") -> GroupedQueryAttention:
    torch.manual_seed(6)
    return GroupedQueryAttention(
        32, 4, num_kv_heads, dtype=torch.float64,
        rope=RotaryEmbedding(8, max_len=40, base=100.0, pairing=pairing),
    ).eval()


def test_layer_with_rope_equals_the_explicit_pipeline():
    layer = _rope_layer()
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    q = layer.q_proj(x).unflatten(-1, (4, 8)).transpose(1, 2)  # (batch, heads, L, hd)
    k = layer.k_proj(x).unflatten(-1, (2, 8)).transpose(1, 2)
    v = layer.v_proj(x).unflatten(-1, (2, 8)).transpose(1, 2)
    positions = torch.arange(9)
    q, k = (apply_rotary(t, positions, base=100.0) for t in (q, k))
    context = scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    expected = layer.out_proj(context.transpose(1, 2).flatten(-2))
    for need_weights in (False, True):
        out, _ = layer(x, is_causal=True, need_weights=need_weights)
        torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("pairing", PAIRINGS)
def test_decode_step_by_step_equals_full_causal_attention_with_rope(num_kv_heads, pairing):
    layer = _rope_layer(num_kv_heads, pairing)
    x = torch.randn(2, 13, 32, dtype=torch.float64)
    full, _ = layer(x, is_causal=True)
    cache = layer.new_cache(batch=2, max_len=13)
    pieces = [layer.decode(x[:, :5], cache)]  # a prompt of 5 tokens
    pieces += [layer.decode(x[:, t : t + 1], cache) for t in range(5, 13)]  # one at a time
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-10, atol=1e-10)


def test_the_cache_stores_keys_after_rotation():
    layer = _rope_layer()
    x = torch.randn(1, 6, 32, dtype=torch.float64)
    cache = layer.new_cache(batch=1, max_len=6)
    layer.decode(x, cache)
    keys = layer.k_proj(x).unflatten(-1, (2, 8)).transpose(1, 2)  # (1, kv, 6, hd)
    torch.testing.assert_close(cache.keys, apply_rotary(keys, torch.arange(6), base=100.0))


def test_shifted_positions_give_the_same_output():
    """RoPE is relative: the same sequence at positions 20..28 gives the same output."""
    layer = _rope_layer()
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    out, _ = layer(x, is_causal=True)
    shifted = torch.arange(20, 29)
    out_shifted, _ = layer(x, is_causal=True, positions=shifted, key_positions=shifted)
    torch.testing.assert_close(out_shifted, out, rtol=1e-10, atol=1e-10)


def test_without_positions_attention_is_permutation_equivariant_and_rope_breaks_it():
    torch.manual_seed(7)
    plain = GroupedQueryAttention(32, 4, 4, dtype=torch.float64).eval()
    with_rope = GroupedQueryAttention(
        32, 4, 4, dtype=torch.float64, rope=RotaryEmbedding(8, max_len=16)
    ).eval()
    with_rope.load_state_dict(plain.state_dict())
    x = torch.randn(1, 7, 32, dtype=torch.float64)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    out, _ = plain(x)
    out_perm, _ = plain(x[:, perm])
    torch.testing.assert_close(out_perm, out[:, perm], rtol=1e-10, atol=1e-10)
    rope_out, _ = with_rope(x)
    rope_perm, _ = with_rope(x[:, perm])
    assert (rope_perm - rope_out[:, perm]).abs().max() > 1e-3


# ------------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"rotary_dim": 7}, ValueError, "rotary_dim must be even"),
        ({"rotary_dim": 18}, ValueError, "at most head_dim"),
        ({"rotary_dim": 0}, ValueError, "rotary_dim"),
        ({"base": 0.0}, ValueError, "base must be a finite number above 1"),
        ({"base": -5.0}, ValueError, "base must be"),
        ({"base": float("inf")}, ValueError, "base must be"),
        ({"base": "10000"}, TypeError, "base must be a real number"),
        ({"pairing": "rotate_half"}, ValueError, "pairing must be one of"),
    ],
)
def test_bad_rope_arguments_are_refused_clearly(kwargs, error, words):
    x = torch.randn(2, 5, 16)
    with pytest.raises(error, match=words):
        apply_rotary(x, torch.arange(5), **kwargs)
    with pytest.raises(error, match=words):
        RotaryEmbedding(16, **kwargs)


def test_positions_beyond_the_table_are_refused():
    rope = RotaryEmbedding(8, max_len=10)
    with pytest.raises(ValueError, match=r"below max_len=10.*max_len=12 or more"):
        rope(torch.randn(1, 3, 8), torch.arange(9, 12))
    layer = GroupedQueryAttention(16, 2, 1, rope=RotaryEmbedding(8, max_len=4))
    with pytest.raises(ValueError, match="max_len=4"):
        layer(torch.randn(1, 5, 16))
    cache = layer.new_cache(1, 8)
    layer.decode(torch.randn(1, 4, 16), cache)
    with pytest.raises(ValueError, match="max_len=4"):
        layer.decode(torch.randn(1, 1, 16), cache)


@pytest.mark.parametrize(
    ("positions", "error", "words"),
    [
        (torch.arange(4), ValueError, r"shape \(seq_len,\) = \(5,\)"),
        (torch.arange(5.0), TypeError, "integer tensor"),
        (torch.arange(-1, 4), ValueError, "non-negative"),
        ([0, 1, 2, 3, 4], TypeError, "positions"),
    ],
)
def test_bad_positions_are_refused(positions, error, words):
    with pytest.raises(error, match=words):
        apply_rotary(torch.randn(2, 5, 8), positions)


def test_positions_without_rope_and_a_mismatched_rope_are_refused():
    layer = GroupedQueryAttention(16, 2, 1)
    with pytest.raises(ValueError, match="no rotary embedding"):
        layer(torch.randn(1, 3, 16), positions=torch.arange(3))
    with pytest.raises(ValueError, match="head_dim=4"):
        GroupedQueryAttention(16, 2, 1, rope=RotaryEmbedding(4))
    with pytest.raises(TypeError, match="rope must be an mha_ref.RotaryEmbedding"):
        GroupedQueryAttention(16, 2, 1, rope="rope")


# ------------------------------------------------------------------------------------------------
# ALiBi
# ------------------------------------------------------------------------------------------------


def test_alibi_slopes_for_eight_heads_are_the_papers():
    """Press et al.: for 8 heads, 1/2, 1/4, ..., 1/256."""
    expected = torch.tensor([2.0**-i for i in range(1, 9)], dtype=torch.float64)
    torch.testing.assert_close(alibi_slopes(8), expected)


@pytest.mark.parametrize("num_heads", [1, 2, 4, 16, 32])
def test_alibi_slopes_for_powers_of_two(num_heads):
    ratio = 2.0 ** (-8 / num_heads)
    expected = torch.tensor([ratio**h for h in range(1, num_heads + 1)], dtype=torch.float64)
    torch.testing.assert_close(alibi_slopes(num_heads), expected)


@pytest.mark.parametrize("num_heads", [3, 6, 12, 20])
def test_alibi_slopes_for_other_head_counts_follow_the_reference_code(num_heads):
    """The paper's get_slopes: the nearest power of two below, then every other slope of 2x."""
    def get_slopes_power_of_2(n):  # written out as in the paper's repository
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    closest = 2 ** math.floor(math.log2(num_heads))
    expected = get_slopes_power_of_2(closest) + get_slopes_power_of_2(2 * closest)[0::2][
        : num_heads - closest
    ]
    torch.testing.assert_close(alibi_slopes(num_heads), torch.tensor(expected, dtype=torch.float64))
    assert len(set(alibi_slopes(num_heads).tolist())) == num_heads  # every head its own slope


def test_alibi_bias_is_minus_slope_times_distance_and_works_as_a_mask():
    bias = alibi_bias(4, 5)
    slopes = alibi_slopes(4).float()
    assert bias.shape == (4, 5, 5)
    assert bias[:, 3, 1].tolist() == pytest.approx((-2 * slopes).tolist())
    assert (bias.diagonal(dim1=-2, dim2=-1) == 0).all()
    decode = alibi_bias(4, 1, 5, alignment="bottom_right")  # the last query against 5 keys
    torch.testing.assert_close(decode[:, 0], bias[:, 4])
    q, k, v = torch.randn(3, 2, 4, 5, 8, dtype=torch.float64).unbind(0)
    out = scaled_dot_product_attention(q, k, v, attn_mask=bias.double(), is_causal=True)
    reference = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=bias.double() + torch.where(causal_mask(5), 0.0, -math.inf).double()
    )
    torch.testing.assert_close(out, reference)


def test_bad_alibi_arguments_are_refused():
    with pytest.raises(ValueError, match="num_heads"):
        alibi_slopes(0)
    with pytest.raises(TypeError, match="num_heads must be an int"):
        alibi_slopes(2.0)
    with pytest.raises(TypeError, match="floating-point"):
        alibi_bias(4, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="alignment"):
        alibi_bias(4, 3, alignment="left")
