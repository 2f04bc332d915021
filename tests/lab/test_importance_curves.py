"""Head importance during training (example 6): Michel et al.'s gate gradients every few steps."""

import math

import pytest

from mha_ref.tutorial.importance_curves import importance_curves
from mha_ref.tutorial.training import train


@pytest.fixture(scope="module")
def runs():
    # the page's runs (cached when MHA_REF_CACHE_DIR is set)
    return importance_curves(
        num_heads=4, embed_dim=16, seeds=(0, 1, 2), steps=200, eval_every=25, lr=1e-2
    )


def test_shapes_and_normalisation(runs):
    assert [r.seed for r in runs] == [0, 1, 2]
    for run in runs:
        assert run.steps == list(range(25, 201, 25))
        assert len(run.accuracy) == len(run.importance) == len(run.raw_norm) == len(run.steps)
        for row, norm in zip(run.importance, run.raw_norm, strict=True):
            assert len(row) == 4
            assert all(v >= 0 for v in row)
            assert math.isclose(math.sqrt(sum(v * v for v in row)), 1.0, abs_tol=1e-4)
            assert norm > 0


def test_every_run_learns_and_no_head_becomes_unimportant(runs):
    # what the page's prose says: the runs learn the task, and every head keeps a sizeable
    # share on every seed and step (equal shares would be 0.5 each; margin well below)
    for run in runs:
        assert run.accuracy[-1] >= 0.99
        assert run.accuracy[0] < 0.5
        assert min(min(row) for row in run.importance) > 0.2


def test_gradients_grow_while_learning_then_shrink(runs):
    for run in runs:
        peak = max(range(len(run.raw_norm)), key=run.raw_norm.__getitem__)
        assert 0 < peak < len(run.raw_norm) - 1
        assert run.raw_norm[-1] < 0.5 * run.raw_norm[peak]
        assert run.raw_norm[0] < 0.5 * run.raw_norm[peak]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_heads": 3}, "num_heads"),
        ({"seeds": ()}, "seeds"),
        ({"steps": 0}, "steps"),
        ({"eval_every": 0}, "eval_every"),
        ({"steps": 10, "eval_every": 20}, "eval_every"),
    ],
)
def test_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        importance_curves(**kwargs)


def test_same_trajectory_as_train(runs):
    # the docstring's claim: measuring the gates does not change the training
    result = train(num_heads=4, embed_dim=16, seed=0, steps=200, eval_every=25, lr=1e-2)
    assert [a for _, a in result.eval_curve] == runs[0].accuracy
