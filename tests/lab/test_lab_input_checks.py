"""Bad input to the real-model and sliding-window lab functions is a clear error, not a wrong
number: each call here once returned a silent result (a mask that ignored the window, the
identity, NaN) or a raw torch error."""

from __future__ import annotations

import pytest
import torch

from mha_ref.tutorial import windows
from mha_ref.tutorial.real_models import heads, smollm2_heads


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


def test_top_heads_ranks_and_checks_k():
    scores = torch.tensor([[0.1, 0.9, 0.3], [0.8, 0.2, 0.7]])  # (num_layers, num_heads)
    assert heads.top_heads(scores, 3) == [(0, 1), (1, 0), (1, 2)]
    with pytest.raises(ValueError, match=r"k must be an int from 1 to 6 .* got k=7"):
        heads.top_heads(scores, 7)
    with pytest.raises(ValueError, match=r"k must be an int from 1 to 6 .* got k=0"):
        heads.top_heads(scores, 0)
    with pytest.raises(ValueError, match=r"\(num_layers, num_heads\) tensor, got \(6,\)"):
        heads.top_heads(scores.flatten(), 2)


def test_pattern_similarity_value_and_shape_check():
    a = torch.tensor([[1.0, 0.0], [0.5, 0.5]])  # (seq_len, seq_len), causal
    b = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    similarity = heads.pattern_similarity(torch.stack([a, b]))  # (2, 2)
    expected = float((a * b).sum() / (a.norm() * b.norm()))  # cosine of the flattened matrices
    assert similarity[0, 1] == pytest.approx(expected) and similarity[1, 1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"\(num_heads, seq_len, seq_len\).*got \(1, 2, 2, 2\)"):
        heads.pattern_similarity(torch.stack([a, b])[None])


def test_plot_score_maps_checks_its_maps_and_titles():
    maps = [torch.rand(3, 2), torch.rand(3, 2)]  # (num_layers, num_heads) each
    with pytest.raises(ValueError, match="2 titles for 1 maps"):
        heads.plot_score_maps(maps[:1], ["a", "b"], xlabel="x", ylabel="y", colorbar_label="c")
    with pytest.raises(ValueError, match=r"one shape, got shapes \[\(3, 2\), \(2, 3\)\]"):
        heads.plot_score_maps(
            [maps[0], maps[1].T], ["a", "b"], xlabel="x", ylabel="y", colorbar_label="c"
        )
    fig = heads.plot_score_maps(maps[:1], ["一"], xlabel="x", ylabel="y", colorbar_label="c")
    assert len(fig.axes) == 2  # one map and its colour bar


def test_plot_every_head_draws_each_head_in_its_place_and_attaches_all_of_them():
    from mha_ref.tutorial.interactive import view_data

    g = torch.Generator().manual_seed(0)
    weights = [torch.softmax(torch.randn(2, 3, 3, generator=g), dim=-1) for _ in range(4)]
    fig = heads.plot_every_head(
        weights, ["a", "b", "c"], layer_name="block", head_name="head", xlabel="block",
        ylabel="head", key_label="key", query_label="query", colorbar_label="weight",
    )
    mosaic = fig.axes[0].images[0].get_array()  # (num_heads * 4 - 1, num_layers * 4 - 1)
    assert mosaic.shape == (2 * 4 - 1, 4 * 4 - 1)
    # block 2's head 1 sits in the second row of tiles, third column, one white line apart
    assert torch.allclose(torch.tensor(mosaic[4:7, 8:11].data), weights[2][1].double())
    assert mosaic.mask[3].all() and mosaic.mask[:, 3].all()  # the white lines
    data = view_data(fig)
    assert len(data["weights"]) == 8 and data["names"][5] == "block 2 head 1"
    assert data["layers"][5] == "block 2" and data["xlabel"] == "key"
    in_view = torch.tensor(data["weights"][5]).double()  # (3, 3) rounded to 3 decimals
    assert torch.allclose(in_view, weights[2][1].double(), atol=5e-4)
    with pytest.raises(ValueError, match=r"seq_len = len\(labels\) = 2, got \(4, 2, 3, 3\)"):
        heads.plot_every_head(
            weights, ["a", "b"], layer_name="block", head_name="head", xlabel="block",
            ylabel="head", key_label="key", query_label="query", colorbar_label="weight",
        )


@pytest.mark.parametrize(
    ("half_len", "error", "message"),
    [
        (True, TypeError, "half_len must be an int, got bool"),
        (3.0, TypeError, "half_len must be an int, got float"),
        (0, ValueError, r"half_len \(tokens in one copy.*\) must be a positive integer"),
        (-3, ValueError, r"half_len \(tokens in one copy.*\) must be a positive integer"),
    ],
)
def test_induction_and_duplicate_scores_need_a_positive_int_half_len(half_len, error, message):
    # weights that fit 2 * half_len: True was once read as 1 and gave scores, 3.0 a raw torch
    # IndexError, 0 NaN (the mean over no query); -3 got the shape message, which names no fix
    size = max(2 * int(half_len), 0)
    weights = torch.full((1, 2, size, size), 1 / max(size, 1))  # (batch, heads, 2n, 2n)
    for score in (heads.induction_scores, heads.duplicate_token_scores):
        with pytest.raises(error, match=message):
            score(weights, half_len)


def test_group_similarities_checks_the_tensor_before_reading_its_shape():
    with pytest.raises(TypeError, match=r"similarity must be a \(num_heads, num_heads\) torch"):
        heads.group_similarities([[1.0, 0.5], [0.5, 1.0]], 1)  # a list has no .shape
    with pytest.raises(ValueError, match=r"similarity must be \(num_heads, num_heads\), got "
                                         r"shape \(4,\)"):
        heads.group_similarities(torch.ones(4), 2)  # 1-D: shape[1] would be an IndexError
    with pytest.raises(TypeError, match="floating-point tensor .* got dtype torch.bool"):
        heads.group_similarities(torch.eye(4, dtype=torch.bool), 2)  # a mask, not similarities
    with pytest.raises(TypeError, match="num_kv_heads must be an int, got bool"):
        heads.group_similarities(torch.eye(4), True)


def test_group_similarities_needs_two_groups():
    # one group of 4 heads: no pair lies across groups, and the "across" mean would be NaN
    with pytest.raises(ValueError, match=r"at least 2 groups .* num_kv_heads=1"):
        heads.group_similarities(torch.eye(4), 1)


def _plot_every_head(weights, labels=("a", "b", "c")):
    return heads.plot_every_head(
        weights, list(labels), layer_name="block", head_name="head", xlabel="block",
        ylabel="head", key_label="key", query_label="query", colorbar_label="weight",
    )


def test_plot_every_head_checks_each_block_before_stacking_them():
    good = torch.full((2, 3, 3), 1 / 3)  # (num_heads, seq_len, seq_len)
    with pytest.raises(ValueError, match="weights holds no block"):
        _plot_every_head([])
    with pytest.raises(ValueError, match="block 1's weights must be a torch.Tensor .* got list"):
        _plot_every_head([good, good.tolist()])
    with pytest.raises(ValueError, match=r"block 2's weights must be a non-empty 3-D tensor "
                                         r".* got shape \(3, 3\)"):
        _plot_every_head([good, good, good[0]])
    with pytest.raises(ValueError, match=r"block 1's weights must be a non-empty 3-D tensor "
                                         r".* got shape \(0, 3, 3\)"):
        _plot_every_head([good, good[:0]])
    with pytest.raises(ValueError, match=r"one shape, got \(2, 3, 3\) for block 0 and "
                                         r"\(3, 3, 3\) for block 1"):
        _plot_every_head([good, torch.full((3, 3, 3), 1 / 3)])


def test_the_window_and_token_mask_keeps_one_later_token():
    """Example 23's control: the window plus token ``kept`` alone, by hand for 6 tokens."""
    mask = windows._window_and_token_mask(6, 2, 1)  # (6, 6)
    assert mask.tolist() == [
        [True, False, False, False, False, False],
        [True, True, False, False, False, False],
        [False, True, True, False, False, False],
        [False, True, True, True, False, False],
        [False, True, False, True, True, False],
        [False, True, False, False, True, True],
    ]
    # keeping token 0 is the window plus one sink
    assert torch.equal(windows._window_and_token_mask(6, 2, 0), windows.window_mask(6, 2, 1))
    with pytest.raises(ValueError, match="kept must be a position below seq_len=6"):
        windows._window_and_token_mask(6, 2, 6)
    with pytest.raises(ValueError, match="max_tokens must be above 32"):
        windows.streaming_losses("statements", 32, 8, 1)


def test_icl_scores_are_each_rows_late_minus_early_loss():
    """Olsson et al.'s score, one per sequence: late mean (positions 400-510) minus early mean
    (40-59); with constant losses per window it is their difference exactly."""
    losses = torch.zeros(3, 511)  # (3, 511)
    losses[0, 40:60] = 2.0  # early loss 2, late 0: learned
    losses[1, 400:511] = 1.5  # late loss 1.5, early 0
    losses[2, :] = 7.0  # flat
    losses[2, 45] = 27.0  # one early token: early mean 8
    scores = smollm2_heads.icl_scores(losses)  # (3,)
    torch.testing.assert_close(scores, torch.tensor([-2.0, 1.5, -1.0]))
    assert smollm2_heads.icl_score(losses) == pytest.approx(float(scores.mean()), abs=1e-6)
    with pytest.raises(ValueError, match="at least 511 positions"):
        smollm2_heads.icl_scores(torch.zeros(2, 510))
    with pytest.raises(ValueError, match=r"shape \(batch, positions\)"):
        smollm2_heads.icl_scores(torch.zeros(511))
    with pytest.raises(TypeError, match="losses must be a floating-point"):
        smollm2_heads.icl_scores(torch.zeros(2, 511, dtype=torch.long))


def test_mean_and_standard_error_by_hand():
    """Values 1, 2, 4, 5: mean 3, sample variance (4 + 1 + 1 + 4) / 3 = 10 / 3, so the
    standard error is sqrt(10 / 3) / 2. A paired change: the differences' SE, far below the
    SE of either set, since the items' shared spread cancels."""
    mean, se = smollm2_heads.mean_and_standard_error(torch.tensor([1.0, 2.0, 4.0, 5.0]))
    assert mean == pytest.approx(3.0)
    assert se == pytest.approx((10 / 3) ** 0.5 / 2)
    before = torch.tensor([-3.0, 0.0, 2.0, 5.0])
    after = before + torch.tensor([0.1, 0.3, 0.1, 0.3])
    change, change_se = smollm2_heads.mean_and_standard_error(after - before)
    assert change == pytest.approx(0.2)
    assert change_se == pytest.approx((4 * 0.01 / 3) ** 0.5 / 2)  # deviations all +-0.1
    assert change_se < 0.05 * smollm2_heads.mean_and_standard_error(before)[1]
    with pytest.raises(ValueError, match="n >= 2"):
        smollm2_heads.mean_and_standard_error(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="finite"):
        smollm2_heads.mean_and_standard_error(torch.tensor([1.0, float("nan")]))
    with pytest.raises(TypeError, match="values must be a floating-point"):
        smollm2_heads.mean_and_standard_error([1.0, 2.0])


def test_icl_windows_start_every_stride_while_a_window_fits():
    assert smollm2_heads.icl_windows(torch.zeros(511, dtype=torch.long)) == []
    assert smollm2_heads.icl_windows(torch.zeros(512, dtype=torch.long)) == [0]
    assert smollm2_heads.icl_windows(torch.zeros(1279, dtype=torch.long)) == [0, 384]
    assert smollm2_heads.icl_windows(torch.zeros(1280, dtype=torch.long)) == [0, 384, 768]
    with pytest.raises(ValueError, match="tokens must be a 1-D tensor"):
        smollm2_heads.icl_windows(torch.zeros(1, 600, dtype=torch.long))


def test_matched_controls_draw_as_many_heads_per_block_and_none_excluded():
    """Gemma 3's top induction heads sit two in block 5 and one in block 11, of four heads a
    block: every control set holds the other two of block 5 and one other of block 11."""
    chosen = [(5, 1), (11, 2), (5, 2)]
    sets = heads.matched_controls(chosen, 4, chosen, draws=3, seed=0)
    # only three such sets exist, and three draws give each of them once
    assert sorted(sets) == [[(5, 0), (5, 3), (11, h)] for h in (0, 1, 3)]
    assert heads.matched_controls(chosen, 4, chosen, 3, seed=0) == sets  # seeded
    more = heads.matched_controls(chosen, 4, chosen, 5, seed=0)  # more draws than sets
    assert more[:3] == sets and all(picked in sets for picked in more[3:])
    # nine heads a block, as SmolLM2: two of block 17, one of block 18, never a chosen one
    smol = [(18, 6), (17, 3), (17, 4)]
    for picked in heads.matched_controls(smol, 9, smol, 3, seed=0):
        assert [layer for layer, _ in picked] == [17, 17, 18] and not set(picked) & set(smol)
    with pytest.raises(ValueError, match="block 5 has 1 heads outside excluded, fewer than the 2"):
        heads.matched_controls(chosen, 4, [*chosen, (5, 0)], 1, seed=0)
    with pytest.raises(ValueError, match="draws"):
        heads.matched_controls(chosen, 4, chosen, 0, seed=0)
