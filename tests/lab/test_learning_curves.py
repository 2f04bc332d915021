"""Learning curves per head count (mha_ref.tutorial.learning_curves) and costs at a given width.

The mechanics on tiny configurations; one finding on the real configuration of example 6: one
head and eight heads both converge on the two-relation task within the step budget, with a
curve steady enough that "steps to 0.99" is a fair summary.
"""

from __future__ import annotations

import pytest

from mha_ref.tutorial import cache, head_count, learning_curves, training

SHORT = dict(eval_size=64, probe_size=16)


def test_steps_to_reach_needs_the_curve_to_stay():
    curve = [(10, 0.5), (20, 0.995), (30, 0.98), (40, 0.99), (50, 1.0)]
    assert learning_curves.steps_to_reach(curve, 0.99) == 40  # 20 fell back, so it does not count
    assert learning_curves.steps_to_reach(curve, 0.5) == 10
    assert learning_curves.steps_to_reach(curve[:3], 0.99) is None
    assert learning_curves.steps_to_reach([], 0.99) is None


def _curve(h, seed, reached, final=1.0):
    return learning_curves.LearningCurve(
        h, 16 // h, seed, [25, 50, 75], [0.2, 0.9, final], final, reached, [1.0, 0.5]
    )


def test_accuracy_at_and_summary():
    curve = _curve(1, 0, 75)
    assert curve.accuracy_at(30) == 0.2 and curve.accuracy_at(50) == 0.9
    assert curve.accuracy_at(200) == 1.0  # stopped (converged) before step 200
    with pytest.raises(ValueError, match="step"):
        curve.accuracy_at(10)
    rows = learning_curves.summarize_curves(
        [_curve(1, 0, 75), _curve(1, 1, 50), _curve(1, 2, 75), _curve(2, 0, None, 0.9)]
    )
    assert [r["num_heads"] for r in rows] == [1, 2]
    assert rows[0]["steps_to_threshold"] == [75, 50, 75] and rows[0]["median_steps"] == 75
    assert rows[1]["median_steps"] is None and rows[1]["final_min"] == 0.9


def test_learning_curves_structure_and_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path))
    curves = learning_curves.learning_curves(
        (1, 2), seeds=(0, 1), steps=10, eval_every=4, threshold=0.0, **SHORT
    )
    assert [(c.num_heads, c.seed) for c in curves] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    for c in curves:
        run = training.train(num_heads=c.num_heads, seed=c.seed, steps=10, eval_every=4, **SHORT)
        assert c.steps == [4, 8, 10] and c.accuracy == [a for _, a in run.eval_curve]
        assert c.final_accuracy == run.accuracy == c.accuracy[-1]
        assert c.steps_to_threshold == 4 and c.head_dim == 16 // c.num_heads
    monkeypatch.setattr(learning_curves, "_learning_curves", lambda **_: pytest.fail("hit"))
    again = learning_curves.learning_curves(
        (1, 2), seeds=(0, 1), steps=10, eval_every=4, threshold=0.0, **SHORT
    )
    assert again == curves
    with pytest.raises(ValueError, match="divide"):
        learning_curves.learning_curves((3,))
    with pytest.raises(ValueError, match="eval_every"):
        learning_curves.learning_curves((1,), steps=10, eval_every=20)


@pytest.mark.parametrize("num_heads", [1, 8])
def test_every_head_count_converges_on_the_tiny_task(num_heads):
    """Measured (example 6, seed 0): h=1 converges at 475 steps, h=8 at 425, of 1500 allowed."""
    (curve,) = learning_curves.learning_curves(
        (num_heads,), seeds=(0,), steps=1500, eval_every=25, stop_accuracy=0.999, stop_patience=4
    )
    assert curve.final_accuracy >= 0.999
    assert curve.steps[-1] <= 1000  # stopped by the convergence rule, well before the budget
    assert curve.steps_to_threshold is not None
    first_crossing = next(s for s, a in zip(curve.steps, curve.accuracy, strict=True) if a >= 0.99)
    assert curve.steps_to_threshold - first_crossing <= 50  # no long dip after the first crossing
    assert curve.accuracy_at(200) < 0.99  # after 200 steps neither has finished learning


def test_width_costs_tiny():
    rows = head_count.width_costs((1, 2, 4), embed_dim=8, seq_len=5, batch=2, repeats=1)
    assert [r["h"] for r in rows] == [1, 2, 4] and [r["head_dim"] for r in rows] == [8, 4, 2]
    assert {r["parameters"] for r in rows} == {4 * 8 * 8 + 4 * 8}
    assert [r["weight_bytes"] for r in rows] == [2 * h * 5 * 5 * 4 for h in (1, 2, 4)]
    assert all(r["fused_s"] > 0 and r["explicit_s"] > 0 for r in rows)
    with pytest.raises(ValueError, match="divide"):
        head_count.width_costs((3,), embed_dim=8)


def test_width_costs_interleave_the_rounds_and_keep_the_minimum():
    """A fake clock: every call lasts 1 s, except that the third round is the fastest."""
    ticks = []

    def clock():
        ticks.append(None)
        reads = len(ticks)  # two reads per timed call
        call = (reads - 1) // 2  # 0-based index of the timed call
        round_ = (call - 4) // 4  # 4 warm-up timed calls, then 4 per round (2 h x 2 paths)
        duration = 0.25 if round_ == 2 else 1.0
        return (reads - 1) // 2 * 10.0 + (duration if reads % 2 == 0 else 0.0)

    rows = head_count.width_costs((1, 2), embed_dim=4, seq_len=3, batch=1, repeats=4, clock=clock)
    assert len(ticks) == 2 * (4 + 4 * 4)
    assert all(r["fused_s"] == 0.25 and r["explicit_s"] == 0.25 for r in rows)
    with pytest.raises(ValueError, match="repeats"):
        head_count.width_costs((1,), embed_dim=4, repeats=0)


def test_plots_take_chinese_labels(clean_matplotlib):
    curves = [_curve(1, 0, 75), _curve(1, 1, 50), _curve(2, 0, 50)]
    fig = learning_curves.plot_learning_curves(curves, title="训练过程中的评估准确率")
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "h = 1",
        "h = 2",
        "threshold 0.99",
    ]
    rows = learning_curves.summarize_curves(curves)
    published = [{"h": 1, "bleu": 24.9}, {"h": 8, "bleu": 25.8}]
    fig = learning_curves.plot_steps_to_threshold(rows, published, steps_title="学习速度")
    assert len(fig.axes) == 2 and fig.axes[0].get_title() == "学习速度"
    assert fig.axes[1].get_ylim()[1] - fig.axes[1].get_ylim()[0] >= 3.0


def test_truncate_curve_is_a_shorter_run():
    """The first N steps of a longer deterministic run are a run of N steps."""
    (long,) = learning_curves.learning_curves((2,), seeds=(0,), steps=12, eval_every=4, **SHORT)
    (short,) = learning_curves.learning_curves((2,), seeds=(0,), steps=8, eval_every=4, **SHORT)
    cut = learning_curves.truncate_curve(long, 8, 0.5)
    assert cut.steps == short.steps == [4, 8] and cut.accuracy == short.accuracy
    assert cut.final_accuracy == short.final_accuracy and cut.loss_curve == short.loss_curve
    assert cut.offset_profile is None and short.offset_profile is not None
    assert learning_curves.truncate_curve(long, 100, 0.5).steps == long.steps
    with pytest.raises(ValueError, match="evaluated step"):
        learning_curves.truncate_curve(long, 6, 0.5)


def test_learned_counts():
    rows = learning_curves.learned_counts(
        {0.01: [_curve(1, 0, 75), _curve(1, 1, None, 0.5)], 0.03: [_curve(1, 0, None, 0.2)]}, 0.9
    )
    assert [(r["lr"], r["learned"], r["seeds"]) for r in rows] == [(0.01, 1, 2), (0.03, 0, 1)]


def test_one_head_fails_at_three_times_the_rate_where_four_heads_learn():
    """Example 6's sweep (400 steps, 3 seeds). The single head collapses onto one offset and
    stays near what one token allows (a read-out of one token reaches about 0.21); every seed of
    h=4 learns. At the page's rate the single head keeps a soft split over the two keys."""
    kwargs = dict(seeds=(0, 1, 2), steps=400, eval_every=25, stop_accuracy=0.999, stop_patience=4)
    high = learning_curves.learning_curves((1, 4), lr=3e-2, **kwargs)
    for c in high:
        if c.num_heads == 1:
            assert c.final_accuracy < 0.3  # far below 0.9, near the one-token bound
            assert c.entropy[0] < 0.1  # one-hot: the uniform entropy over 6-7 keys is > 1.7
        else:
            assert c.final_accuracy >= 0.9
            # every head sharp, and the four heads cover both offsets -1 and -2
            assert max(c.entropy) < 0.2
            peaks = {max(range(len(p)), key=p.__getitem__) for p in c.offset_profile}
            assert peaks == {1, 2}
    (page,) = learning_curves.learning_curves((1,), seeds=(0,), steps=400, eval_every=25,
                                              stop_accuracy=0.999, stop_patience=4)
    assert page.final_accuracy >= 0.9
    split = page.offset_profile[0]
    assert page.entropy[0] > 0.4 and min(split[1], split[2]) > 0.2  # both keys get weight


def test_decode_step_traffic_counts_by_hand():
    """Shazeer 2019, 2.4.1: one decode step reads the cache for about one FLOP per byte."""
    t = head_count.decode_step_traffic(1, 10, 8, 2, 2, bytes_per_element=1)
    # weights: q and out 8x8 each, k and v 8x8 each (2 kv heads x 4 = 8 rows): 256 elements
    assert t["weight_bytes"] == 256 and t["cache_bytes"] == 2 * 10 * 2 * 4
    assert t["flops"] == 2 * 256 + 4 * 2 * 10 * 4
    mha = head_count.decode_step_traffic(64, 4096, 512, 8, 8)
    mqa = head_count.decode_step_traffic(64, 4096, 512, 8, 1)
    assert mha["cache_bytes"] == 8 * mqa["cache_bytes"]
    assert mqa["intensity"] > mha["intensity"]
    assert mha["intensity"] < 2  # far below any GPU's ridge point (hundreds of FLOP/byte)
    with pytest.raises(ValueError, match="num_kv_heads"):
        head_count.decode_step_traffic(1, 10, 8, 2, 3)
