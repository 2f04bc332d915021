"""Shared fixtures: the textbook sentence, a seeded generator, a clean matplotlib state."""

from __future__ import annotations

import pytest
import torch

#: The six-token example sentence of the textbook ("Your journey starts with one step").
TEXTBOOK_INPUTS = [
    [0.43, 0.15, 0.89],
    [0.55, 0.87, 0.66],
    [0.57, 0.85, 0.64],
    [0.22, 0.58, 0.33],
    [0.77, 0.25, 0.10],
    [0.05, 0.80, 0.55],
]


@pytest.fixture
def textbook_batch() -> torch.Tensor:
    """The textbook sentence stacked twice: shape (2, 6, 3)."""
    inputs = torch.tensor(TEXTBOOK_INPUTS)
    return torch.stack((inputs, inputs))


@pytest.fixture
def generator() -> torch.Generator:
    """A seeded CPU generator, so each test draws the same random tensors on every run."""
    return torch.Generator().manual_seed(20240601)


@pytest.fixture
def clean_matplotlib():
    """The Agg backend and matplotlib's default settings for one test; no figure left open."""
    matplotlib = pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context():
        matplotlib.rcParams.update(matplotlib.rcParamsDefault)
        matplotlib.use("Agg")
        yield
    plt.close("all")
