"""Example 26's tools (mha_ref.tutorial.real_models.qk_norm_and_sinks): the logits against the
attention weights the layer itself computes (with and without QK-norm, grouped key/value heads),
the logit bound against random inputs and a hand-computed case, and the first-token mass on a
known pattern."""

from __future__ import annotations

import pytest
import torch

from mha_ref import GroupedQueryAttention, QKNorm, RotaryEmbedding
from mha_ref.tutorial.real_models.qk_norm_and_sinks import (
    attention_logits,
    first_token_mass,
    logit_bound,
)


def _layer(qk_norm: bool, num_kv_heads: int = 1, scale: float | None = 0.25):
    torch.manual_seed(0)
    norm = QKNorm(16, kind="rms", dtype=torch.float64) if qk_norm else None
    layer = GroupedQueryAttention(
        24, 4, num_kv_heads, bias=False, head_dim=16, scale=scale, dtype=torch.float64,
        rope=RotaryEmbedding(16, max_len=32, pairing="half"), qk_norm=norm,
    ).eval()
    if qk_norm:
        with torch.no_grad():  # gains away from 1, so a missing norm would show
            layer.qk_norm.query_norm.weight.uniform_(0.5, 3.0)
            layer.qk_norm.key_norm.weight.uniform_(0.5, 3.0)
    return layer


@pytest.mark.parametrize(("qk_norm", "num_kv_heads", "scale"),
                         [(True, 1, 0.25), (False, 2, None), (True, 4, None)])
def test_softmax_of_the_logits_is_the_layers_own_weights(qk_norm, num_kv_heads, scale):
    layer = _layer(qk_norm, num_kv_heads, scale)
    x = torch.randn(2, 10, 24, dtype=torch.float64)
    with torch.no_grad():
        _, weights = layer(x, is_causal=True, need_weights=True)  # (2, 4, 10, 10)
        logits = attention_logits(layer, x)  # (2, 4, 10, 10)
    causal = torch.ones(10, 10, dtype=torch.bool).tril()
    rebuilt = logits.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    torch.testing.assert_close(rebuilt, weights, rtol=0, atol=1e-12)


def test_no_logit_exceeds_the_bound_and_uniform_gains_give_the_formula():
    layer = _layer(qk_norm=True)
    bound = logit_bound(layer)
    with torch.no_grad():
        logits = attention_logits(layer, 100.0 * torch.randn(4, 32, 24, dtype=torch.float64))
        assert logits.abs().max() <= bound
        layer.qk_norm.query_norm.weight.fill_(2.0)
        layer.qk_norm.key_norm.weight.fill_(3.0)
    # scale 0.25 * head_dim 16 * 2 * 3
    assert logit_bound(layer) == pytest.approx(24.0)


def test_logit_bound_needs_qk_norm():
    with pytest.raises(ValueError, match="needs a layer with QK-norm"):
        logit_bound(_layer(qk_norm=False))


def test_first_token_mass_of_a_known_pattern():
    weights = torch.zeros(1, 2, 6, 6)
    weights[0, 0, :, 0] = 1.0  # head 0: everything on token 0
    weights[0, 1, 3:, 0] = 0.5  # head 1: half, from query 3 on
    assert first_token_mass(weights, 1, 6).tolist() == pytest.approx([1.0, 0.5 * 3 / 5])
    assert first_token_mass(weights, 3, 6).tolist() == [1.0, 0.5]
    with pytest.raises(ValueError, match="start < stop"):
        first_token_mass(weights, 0, 6)
