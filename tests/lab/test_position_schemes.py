"""Example 20's lab: the induction model's position schemes, the measurements, and the findings.

The model tests are properties of the code (the learned default computes what example 10's model
computed, every scheme starts from the same other weights, the scores' softmax is the weights,
the interventions change only what they say). The findings are asserted on the trained runs of
example 20 (all five schemes, five seeds, ``SHORT_RECIPE``: each run to its stopping rule or
its cap), read from the docs build's cache when that holds them, else trained here (about 90 s
on one thread), with margins on the safe side of what every seed showed.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from mha_ref import alibi_slopes, causal_mask
from mha_ref.masks import allowed_to_blocked
from mha_ref.tutorial import induction, induction_training, positions
from mha_ref.tutorial.cache import CACHE_ENV_VAR
from mha_ref.tutorial.induction import AttentionOnlyTransformer, sinusoidal_positions

CACHE = Path(__file__).resolve().parents[2] / "build" / ".cache" / "experiments"
TOY = dict(vocab_size=24, seq_len=20, embed_dim=32, num_heads=2)


def _model(position: str, seed: int = 0) -> AttentionOnlyTransformer:
    torch.manual_seed(seed)
    return AttentionOnlyTransformer(**TOY, position=position).eval()


def _batch(n: int = 16, seq_len: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return induction.make_repeated_batch(n, seq_len, 24, generator, 3, 10)


# -- the model ----------------------------------------------------------------------------------


def test_the_learned_default_computes_what_example_10s_model_computed():
    """The forward pass of position="learned", written out as it was before the option."""
    model = _model("learned")
    tokens, _ = _batch()
    x = model.token_embedding(tokens) + model.position_embedding(torch.arange(20))
    blocked = allowed_to_blocked(causal_mask(20))
    expected_weights = []
    for layer in model.layers:
        out, weights = layer(x, x, x, attn_mask=blocked, need_weights=True,
                             average_attn_weights=False)
        x = x + out
        expected_weights.append(weights)
    logits, weights = model(tokens)
    assert torch.equal(logits, model.unembed(x))
    assert all(torch.equal(a, b) for a, b in zip(weights, expected_weights, strict=True))


def test_every_scheme_starts_from_the_same_other_weights():
    reference = dict(_model("learned").named_parameters())
    for position in induction.POSITIONS[1:]:
        model = _model(position)
        for name, parameter in model.named_parameters():
            assert torch.equal(parameter, reference[name]), (position, name)
        assert model.position_embedding is None
        assert all(not name.startswith("position_embedding") for name in model.state_dict())


@pytest.mark.parametrize("position", induction.POSITIONS)
def test_the_scores_softmax_is_the_weights(position):
    model = _model(position)
    tokens, _ = _batch()
    with torch.no_grad():
        _, weights = model(tokens)
        x = model.embed(tokens)
        scores = model.attention_scores(model.layers[0], x)  # (N, h, L, L)
    torch.testing.assert_close(scores.softmax(dim=-1), weights[0], rtol=1e-5, atol=1e-6)


def test_rope_without_rotation_is_the_plain_layer():
    """The rotary path with every token at position 0 is MultiHeadAttention's own computation."""
    model = _model("rope")
    x = torch.randn(3, 20, 32)
    layer = model.layers[0]
    unrotated, weights = model.attend(layer, x, x, x, with_positions=False)
    blocked = allowed_to_blocked(causal_mask(20))
    plain, plain_weights = layer(x, x, x, attn_mask=blocked, average_attn_weights=False)
    torch.testing.assert_close(unrotated, plain, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weights, plain_weights, rtol=1e-5, atol=1e-6)
    rotated, _ = model.attend(layer, x, x, x)
    assert (rotated - plain).abs().max() > 1e-2  # and the rotation does change it


def test_alibi_adds_minus_slope_times_distance_to_the_scores():
    model = _model("alibi")
    x = torch.randn(2, 20, 32)
    layer = model.layers[0]
    with_bias = model.attention_scores(layer, x)
    without = model.attention_scores(layer, x, with_positions=False)
    slopes = alibi_slopes(2).float()
    i, j = 12, 4
    torch.testing.assert_close(with_bias[:, :, i, j] - without[:, :, i, j],
                               (-slopes * (i - j)).expand(2, 2))
    assert torch.isinf(with_bias[:, :, j, i]).all()  # the future stays blocked


def test_sinusoidal_positions_follow_vaswani():
    table = sinusoidal_positions(7, 6)
    for p in range(7):
        for i in range(3):
            angle = p / 10000 ** (2 * i / 6)
            assert table[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    with pytest.raises(ValueError, match="even embed_dim"):
        sinusoidal_positions(4, 5)


def test_schemes_other_than_learned_run_longer_sequences():
    tokens, _ = _batch(4, 40)
    for position in ("sinusoidal", "rope", "alibi", "none"):
        logits, weights = _model(position)(tokens)
        assert logits.shape == (4, 40, 24) and weights[0].shape == (4, 2, 40, 40)
    with pytest.raises(IndexError):
        _model("learned")(tokens)  # the learned table has 20 rows


def test_an_unknown_scheme_is_refused():
    with pytest.raises(ValueError, match="position must be one of"):
        AttentionOnlyTransformer(**TOY, position="relative")
    with pytest.raises(ValueError, match="position must be one of"):
        induction_training.train_induction(position="nope", steps=1)


def test_ablation_and_composition_work_for_every_scheme():
    tokens, periods = _batch()
    for position in induction.POSITIONS:
        model = _model(position)
        full = induction.accuracy_with_ablation(model, tokens, periods)
        assert 0.0 <= full <= 1.0
        accuracies = induction.composition_ablation(model, tokens, periods, head=0)
        assert set(accuracies) == {"none", "Q", "K", "V"}
        assert accuracies["none"] == pytest.approx(full, abs=0.02)  # fused vs explicit path


# -- the measurements ---------------------------------------------------------------------------


def test_position_scores_are_what_each_scheme_says():
    spread = {p: positions.diagonal_spread(positions.position_scores(_model(p)))
              for p in induction.POSITIONS}
    assert (spread["rope"] < 1e-5).all() and (spread["alibi"] < 1e-6).all()  # i - j alone
    assert (spread["learned"] > 0.1).all() and (spread["sinusoidal"] > 0.1).all()
    assert positions.position_scores(_model("none")).nan_to_num(0.0).abs().max() == 0.0
    alibi = positions.position_scores(_model("alibi"))  # exactly the bias
    i, j = torch.tril_indices(20, 20)
    expected = -alibi_slopes(2)[:, None] * (i - j).double()
    torch.testing.assert_close(alibi[:, i, j], expected, rtol=1e-5, atol=1e-5)
    assert alibi[:, 0, 5].isnan().all()  # blocked


def test_diagonal_spread_of_known_maps():
    toeplitz = torch.arange(20.0)[:, None] - torch.arange(20.0)[None]  # depends on i - j
    varying = toeplitz + torch.arange(20.0)[:, None] ** 2
    maps = torch.stack([toeplitz, varying, torch.zeros(20, 20)])
    maps = maps.masked_fill(~causal_mask(20), float("nan"))
    spread = positions.diagonal_spread(maps)
    assert spread[0] == 0.0 and spread[1] > 0.5 and spread[2] == 0.0


def test_moved_copies_is_example_10s_construction():
    period, seq_len = 5, 20
    tokens, periods = induction.make_repeated_batch(
        64, seq_len, 24, torch.Generator().manual_seed(1), period, period
    )
    first_copy = seq_len - 2 * period
    for gap in range(0, first_copy + 1, 2):
        moved = tokens.clone()  # example 10, exercise 2, as its page writes it
        block = slice(first_copy - gap, first_copy + period)
        moved[:, block] = tokens[:, block].roll(-gap, dims=1)
        assert torch.equal(positions.moved_copies(tokens, period, gap), moved)
        start = first_copy - gap  # the first copy now starts here, the second is unchanged
        assert torch.equal(moved[:, start : start + period], moved[:, -period:])
    with pytest.raises(ValueError, match="gap must be in 0 .. 10"):
        positions.moved_copies(tokens, period, 11)


def test_positions_removed_takes_positions_out_of_one_layers_search_only():
    tokens, _ = _batch()
    for position in ("learned", "sinusoidal", "rope", "alibi"):
        model = _model(position)
        with torch.no_grad():
            x = model.embed(tokens)
            added = x - model.embed(tokens, with_positions=False)
            x1 = x + model.attend(model.layers[0], x, x, x)[0]
            search = x1 - added
            expected = x1 + model.attend(model.layers[1], search, search, x1,
                                         with_positions=False)[0]
            with positions.positions_removed(model, [1]):
                logits, weights = model(tokens)
            assert model.positionless_layers == frozenset()  # restored
            torch.testing.assert_close(logits, model.unembed(expected), rtol=1e-5, atol=1e-5)
            normal, normal_weights = model(tokens)
            assert torch.equal(weights[0], normal_weights[0])  # layer 1 untouched
            assert (weights[1] - normal_weights[1]).abs().max() > 1e-3
    with pytest.raises(ValueError, match="none to remove"):
        with positions.positions_removed(_model("none"), [1]):
            pass
    with pytest.raises(ValueError, match="no layer 2"):
        with positions.positions_removed(_model("rope"), [2]):
            pass


def test_position_study_refuses_bad_arguments():
    with pytest.raises(ValueError, match="positions must be taken from"):
        positions.position_study(positions=("relative",))
    with pytest.raises(ValueError, match="not in recipe"):
        positions.position_study(seed=3)


def test_plot_score_maps_scales_each_map():
    import matplotlib

    matplotlib.use("Agg")
    maps = [torch.randn(5, 5), torch.zeros(5, 5)]
    fig = positions.plot_score_maps(maps, ["a", "零"], ncols=2, colorbar_label="分数")
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 2
    assert abs(images[0].get_array()).max() == pytest.approx(1.0)
    assert abs(images[1].get_array()).max() == 0.0
    with pytest.raises(ValueError, match="2 maps but 1 titles"):
        positions.plot_score_maps(maps, ["a"])


# -- the stopping rule ---------------------------------------------------------------------------


def _rule_holds_at(curve, threshold, window, evaluations, step):
    """The rule written out: the last ``evaluations`` windows before ``step`` all reach it."""
    means = [sum(curve[end - window : end]) / window for end in range(window, step + 1, window)]
    return len(means) >= evaluations and all(m >= threshold for m in means[-evaluations:])


def test_the_stopping_rule_stops_where_it_first_holds_on_a_known_curve():
    # windows of 10 steps: means 0.2, 0.95, 0.5, 0.92, 0.91, 0.97, 1.0
    curve = [0.2] * 10 + [0.95] * 10 + [0.5] * 10 + [0.92] * 10 + [0.91] * 10 + [0.97] * 10
    curve += [1.0] * 10
    stop = induction_training.stopping_step
    assert stop(curve, 0.9, 10, 3) == 60  # 0.92, 0.91, 0.97: the first three in a row
    assert stop(curve, 0.9, 10, 1) == 20  # one evaluation suffices: the first above
    assert stop(curve, 0.95, 10, 2) == 70  # 0.97 and 1.0
    assert stop(curve, 0.9, 10, 5) is None  # never five in a row
    assert stop(curve[:59], 0.9, 10, 3) is None  # the window ending at 60 is not complete
    # a window's mean counts, not its last value: 0.8 then 1.0 averages 0.9
    assert stop([0.8] * 5 + [1.0] * 5, 0.9, 10, 1) == 10
    assert stop([0.8] * 5 + [0.99] * 5, 0.9, 10, 1) is None


@pytest.mark.parametrize("seed", range(20))
def test_the_stopping_rule_never_stops_before_it_holds(seed):
    generator = torch.Generator().manual_seed(seed)
    curve = (torch.rand(300, generator=generator) * 0.3 + torch.linspace(0.4, 1.0, 300))
    curve = curve.clamp(max=1.0).tolist()
    for window, evaluations in ((10, 3), (20, 3), (7, 2)):
        step = induction_training.stopping_step(curve, 0.9, window, evaluations)
        holds = [s for s in range(1, 301) if _rule_holds_at(curve, 0.9, window, evaluations, s)
                 and s % window == 0]
        assert step == (holds[0] if holds else None), (window, evaluations)


def test_the_stopping_rule_refuses_bad_settings():
    with pytest.raises(ValueError, match="threshold must be in"):
        induction_training.stopping_step([0.5], 1.5, 10, 3)
    with pytest.raises(ValueError, match="window and evaluations must be at least 1"):
        induction_training.stopping_step([0.5], 0.9, 0, 3)
    with pytest.raises(ValueError, match="stop_accuracy must be in"):
        induction_training.train_induction(steps=1, stop_accuracy=0.0)
    with pytest.raises(ValueError, match="stop_window and stop_evaluations"):
        induction_training.train_induction(steps=1, stop_accuracy=0.9, stop_evaluations=0)


def test_training_stops_at_the_rule_and_is_the_fixed_run_up_to_there(monkeypatch):
    """A tiny run with an easy rule: it stops where the rule first holds on its own curve, and
    its curve is the first steps of the same run trained without the rule."""
    monkeypatch.delenv(CACHE_ENV_VAR, raising=False)
    recipe = dict(steps=40, batch_size=8, lr=1e-2, seed=0)
    fixed = induction_training.train_induction(**recipe)
    rule = dict(stop_accuracy=min(fixed.accuracy_curve[4:8]) * 0.99 or 0.01, stop_window=2,
                stop_evaluations=2)
    expected = induction_training.stopping_step(fixed.accuracy_curve, rule["stop_accuracy"],
                                                2, 2)
    assert expected is not None and expected < 40
    stopped = induction_training.train_induction(**recipe, **rule)
    assert len(stopped.accuracy_curve) == expected == stopped.converged_step()
    assert stopped.accuracy_curve == fixed.accuracy_curve[:expected]
    assert fixed.converged_step() is None  # no rule, no convergence step
    never = induction_training.train_induction(**recipe, stop_accuracy=1.0, stop_window=40,
                                               stop_evaluations=1)
    assert sum(fixed.accuracy_curve) < 40  # so the rule cannot hold: the run goes to the cap
    assert len(never.accuracy_curve) == 40 and never.converged_step() is None
    assert never.accuracy_curve == fixed.accuracy_curve


# -- the findings of example 20, on every seed ----------------------------------------------------


@pytest.fixture(scope="module")
def study():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV_VAR, str(CACHE))
        return positions.position_study(
            positions=SCHEMES, seeds=SEEDS, **positions.SHORT_RECIPE
        )


SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "none")  # example 20's order
SEEDS = (0, 1, 2, 3, 4)
LEARNERS = ("learned", "sinusoidal", "rope")  # the schemes that form the circuit


def _runs_of(study, schemes):
    return [run for run in study.runs if run.position in schemes]


def test_the_circuit_forms_on_every_run_with_learned_sinusoidal_and_rotary_positions(study):
    assert len(study.runs) == 25 and [run.position for run in study.runs[::5]] == list(SCHEMES)
    for run in _runs_of(study, LEARNERS):
        assert run.converged_step is not None and run.steps == run.converged_step, run
        assert run.phase_change is not None and run.phase_change < run.converged_step, run
        assert run.accuracy > 0.9 and run.previous_token > 0.55, run  # every seed: 0.65 or more
        assert study.converged(run.position) == study.of(run.position)


def test_the_cap_is_more_than_twice_the_slowest_phase_change_and_rope_converges_last(study):
    """The budget the page states: every scheme the same cap, and it is not what limits RoPE."""
    cap = positions.SHORT_RECIPE["steps"]
    changes = [run.phase_change for run in study.runs if run.phase_change is not None]
    assert 2 * max(changes) < cap  # slowest: 287 of 600
    latest = {p: max(run.converged_step for run in study.of(p)) for p in LEARNERS}
    assert latest["rope"] > max(latest["learned"], latest["sinusoidal"]), latest  # 400, 320
    for run in _runs_of(study, ("alibi", "none")):  # to the cap, with the same rule
        assert run.steps == cap and run.converged_step is None, run


def test_alibi_and_no_positions_form_no_previous_token_head_on_any_seed(study):
    """The page's prediction, tested: no phase change and no previous-token head within the
    cap; the task only in part, and their training accuracy still rising at the cap."""
    cap = positions.SHORT_RECIPE["steps"]
    for run in _runs_of(study, ("alibi", "none")):
        assert run.phase_change is None, run
        assert run.previous_token < 0.3, run  # every seed: 0.16 or less
        assert 0.2 < run.accuracy < 0.6, run  # every seed: 0.32 to 0.46
        before = sum(run.accuracy_curve[cap - 200 : cap - 100]) / 100
        last = sum(run.accuracy_curve[cap - 100 :]) / 100
        assert last > before + 0.02, run  # every seed rose by 0.04 or more


def test_every_learner_falls_beyond_the_trained_distances_on_every_seed(study):
    inside, far = study.distances.index(9), len(study.distances) - 1
    assert study.distances[far] > study.config["max_period"] >= study.distances[inside]
    for run in _runs_of(study, LEARNERS):
        assert run.gaps[inside] > 0.9, run
        assert run.gaps[far] < run.gaps[inside] - 0.08, run  # every seed fell by 0.12 or more


def test_layer_2_without_positions_falls_less_on_every_seed(study):
    inside, far = study.distances.index(9), len(study.distances) - 1
    for run in _runs_of(study, LEARNERS):
        without = run.gaps_without_positions
        assert without[inside] - without[far] < run.gaps[inside] - run.gaps[far], run
    for position in LEARNERS:
        # higher at the largest distance on every converged run of the three schemes
        higher = [r.gaps_without_positions[far] > r.gaps[far] for r in study.converged(position)]
        assert all(higher), (position, higher)


def test_rope_runs_longer_sequences_and_learned_cannot(study):
    lengths = study.longer_lens
    for run in study.of("learned"):
        assert [acc is None for acc in run.longer] == [n > 20 for n in lengths]
    for run in study.of("rope"):
        assert run.longer[lengths.index(30)] > 0.7, run  # every seed kept 0.77 or more
    for run in study.of("sinusoidal"):  # runs them, and loses most of its accuracy at 30 tokens
        assert run.longer[lengths.index(20)] > 0.9, run
        assert run.longer[lengths.index(30)] < 0.5, run  # every seed: 0.40 or less


def test_what_the_positions_add_to_the_trained_previous_token_heads(study):
    for run in _runs_of(study, LEARNERS):
        added = positions.position_scores(study.model(run.position, run.seed))[run.previous_head]
        by_offset = torch.stack([added.diagonal(offset=-o).mean() for o in range(20)])
        if run.position == "sinusoidal":  # offsets 0 and 1 raised about equally, more than 2
            # (offset 0 the larger on 4 of 5 seeds, by 0.4 or less: too close to assert which)
            assert int(by_offset.argmax()) in (0, 1), run
            ratio = by_offset[1] / by_offset[0]
            assert 0.85 < ratio < 1.15 and by_offset[0] > 0, run  # every seed: 0.92 to 1.0
            assert by_offset[1] > by_offset[2] + 1.0, run  # every seed: by 1.4 or more
            continue
        assert int(by_offset.argmax()) == 1, run
        if run.position == "rope":  # a function of the offset alone
            assert positions.diagonal_spread(added[None])[0] < 1e-4


def test_the_study_is_deterministic_and_its_runs_are_the_trainings(study):
    run = study.of("rope")[2]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV_VAR, str(CACHE))
        result = induction_training.train_induction(
            **positions.SHORT_RECIPE, position="rope", seed=2
        )
    assert result.phase_change_step() == run.phase_change
    assert result.converged_step() == run.converged_step == len(result.accuracy_curve)
    model = result.model()
    tokens, periods = result.evaluation_batch()
    assert induction.accuracy_with_ablation(model, tokens, periods) == run.accuracy
