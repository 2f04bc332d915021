"""Seeded randomised parity against PyTorch: forward values, weights and gradients.

* ``MultiHeadAttention`` vs ``torch.nn.MultiheadAttention`` (same weights via
  ``load_state_dict``) over 600 configurations drawn by a seeded ``random.Random``.
* ``scaled_dot_product_attention`` vs ``torch.nn.functional.scaled_dot_product_attention``.
* ``GroupedQueryAttention`` vs ``F.scaled_dot_product_attention(..., enable_gqa=True)``.

The generic loop avoids the cases where PyTorch itself returns NaN (a query row whose keys are
all masked: key 0 is always left unmasked) and PyTorch's ``is_causal`` quirk with extra keys;
both are tested separately below with their documented expectations.
"""

from __future__ import annotations

import math
import random
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mha_ref import (
    GroupedQueryAttention,
    MultiHeadAttention,
    causal_mask,
    scaled_dot_product_attention,
)

TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5}
NUM_MHA_CONFIGS = 600
NUM_SDPA_CONFIGS = 200
NUM_GQA_CONFIGS = 60


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, what: str):
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance, msg=what)


# ----------------------------------------------------------------------------------------------
# MultiHeadAttention vs torch.nn.MultiheadAttention
# ----------------------------------------------------------------------------------------------

ATTN_MASK_KINDS = ["none", "bool2d", "bool3d", "float2d", "float3d", "causal_bool", "causal_float"]
PADDING_MASK_KINDS = ["none", "bool", "float"]


@dataclass(frozen=True)
class MhaConfig:
    seed: int
    dtype: torch.dtype
    batch: int
    query_len: int
    key_len: int
    num_heads: int
    head_dim: int
    kdim: int
    vdim: int
    bias: bool
    add_bias_kv: bool
    add_zero_attn: bool
    batch_first: bool
    unbatched: bool
    self_attention: bool
    attn_mask_kind: str
    is_causal: bool
    padding_mask_kind: str
    need_weights: bool
    average_attn_weights: bool

    @property
    def embed_dim(self) -> int:
        return self.num_heads * self.head_dim


def sample_mha_config(seed: int) -> MhaConfig:
    rng = random.Random(seed)
    num_heads, head_dim = rng.randint(1, 4), rng.randint(1, 4)
    embed_dim = num_heads * head_dim
    same_dims = rng.random() < 0.6
    kdim = embed_dim if same_dims else rng.randint(1, 7)
    vdim = embed_dim if same_dims else rng.randint(1, 7)
    query_len = rng.randint(1, 5)
    self_attention = kdim == vdim == embed_dim and rng.random() < 0.4
    key_len = query_len if self_attention else rng.randint(1, 5)
    add_bias_kv, add_zero_attn = rng.random() < 0.3, rng.random() < 0.3
    attn_mask_kind = rng.choice(ATTN_MASK_KINDS)
    padding_mask_kind = rng.choice(PADDING_MASK_KINDS)
    need_weights = rng.random() < 0.6
    # is_causal is a hint that attn_mask is the causal mask (torch requires the mask).
    is_causal = attn_mask_kind.startswith("causal") and rng.random() < 0.6
    if is_causal and (add_bias_kv or add_zero_attn) and padding_mask_kind == "none":
        # torch then ignores attn_mask when need_weights=False and applies is_causal to the
        # extra keys too (see test_torch_is_causal_quirk_with_extra_keys); keep the hint off.
        is_causal = need_weights
    return MhaConfig(
        seed=seed,
        dtype=rng.choice([torch.float32, torch.float64]),
        batch=rng.randint(1, 3),
        query_len=query_len,
        key_len=key_len,
        num_heads=num_heads,
        head_dim=head_dim,
        kdim=kdim,
        vdim=vdim,
        bias=rng.random() < 0.7,
        add_bias_kv=add_bias_kv,
        add_zero_attn=add_zero_attn,
        batch_first=rng.random() < 0.5,
        unbatched=rng.random() < 0.2,
        self_attention=self_attention,
        attn_mask_kind=attn_mask_kind,
        is_causal=is_causal,
        padding_mask_kind=padding_mask_kind,
        need_weights=need_weights,
        average_attn_weights=rng.random() < 0.5,
    )


def _random_blocked(shape, generator) -> torch.Tensor:
    """Bool mask, True = blocked (MHA convention), with key 0 always allowed (no NaN rows)."""
    blocked = torch.rand(shape, generator=generator) < 0.35
    blocked[..., 0] = False
    return blocked


def _random_additive(shape, dtype, generator) -> torch.Tensor:
    """Float mask: small random values plus some -inf, key 0 always finite."""
    values = torch.randn(shape, generator=generator, dtype=dtype) * 0.5
    return values.masked_fill(_random_blocked(shape, generator), -math.inf)


def make_attn_mask(config: MhaConfig, generator) -> torch.Tensor | None:
    length_shape = (config.query_len, config.key_len)
    leading = config.num_heads if config.unbatched else config.batch * config.num_heads
    kind = config.attn_mask_kind
    if kind == "none":
        return None
    if kind.startswith("causal"):
        blocked = torch.ones(length_shape, dtype=torch.bool).triu(diagonal=1)  # top-left
        if kind == "causal_bool":
            return blocked
        return torch.zeros(length_shape, dtype=config.dtype).masked_fill(blocked, -math.inf)
    shape = length_shape if kind.endswith("2d") else (leading, *length_shape)
    if kind.startswith("bool"):
        return _random_blocked(shape, generator)
    return _random_additive(shape, config.dtype, generator)


def make_padding_mask(config: MhaConfig, generator) -> torch.Tensor | None:
    shape = (config.key_len,) if config.unbatched else (config.batch, config.key_len)
    if config.padding_mask_kind == "none":
        return None
    if config.padding_mask_kind == "bool":
        return _random_blocked(shape, generator)
    return _random_additive(shape, config.dtype, generator)


def make_inputs(config: MhaConfig, generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    def layout(seq_len: int, features: int) -> tuple[int, ...]:
        if config.unbatched:
            return (seq_len, features)
        if config.batch_first:
            return (config.batch, seq_len, features)
        return (seq_len, config.batch, features)

    def draw(shape):
        return torch.randn(shape, generator=generator, dtype=config.dtype).requires_grad_()

    query = draw(layout(config.query_len, config.embed_dim))
    if config.self_attention:
        return query, query, query
    key = draw(layout(config.key_len, config.kdim))
    value = draw(layout(config.key_len, config.vdim))
    return query, key, value


def build_pair(config: MhaConfig) -> tuple[torch.nn.MultiheadAttention, MultiHeadAttention]:
    # one set of constructor arguments for both modules, so they cannot drift apart
    arguments = dict(
        embed_dim=config.embed_dim,
        num_heads=config.num_heads,
        bias=config.bias,
        add_bias_kv=config.add_bias_kv,
        add_zero_attn=config.add_zero_attn,
        kdim=config.kdim,
        vdim=config.vdim,
        batch_first=config.batch_first,
        dtype=config.dtype,
    )
    torch.manual_seed(config.seed)
    theirs = torch.nn.MultiheadAttention(**arguments)
    with torch.no_grad():  # non-zero biases, so that a wrong bias slice would show
        for parameter in theirs.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    # the suite checks the explicit path; the fused one has its own test
    ours = MultiHeadAttention(**arguments, use_fused=False)
    ours.load_state_dict(theirs.state_dict())
    return theirs, ours


def run_forward_backward(module, config: MhaConfig, inputs, masks, cotangents):
    """Forward, then gradients of <output, cotangent> (+ <weights, cotangent>)."""
    attn_mask, key_padding_mask = masks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: mixed mask types are deprecated
        output, weights = module(
            *inputs,
            key_padding_mask=key_padding_mask,
            need_weights=config.need_weights,
            attn_mask=attn_mask,
            average_attn_weights=config.average_attn_weights,
            is_causal=config.is_causal,
        )
    loss = (output * cotangents[0]).sum()
    if weights is not None:
        loss = loss + (weights * cotangents[1][: weights.numel()].view_as(weights)).sum()
    unique_inputs = list({id(tensor): tensor for tensor in inputs}.values())
    names = [name for name, _ in module.named_parameters()]
    parameters = [parameter for _, parameter in module.named_parameters()]
    gradients = torch.autograd.grad(loss, unique_inputs + parameters)
    input_grads = gradients[: len(unique_inputs)]
    param_grads = dict(zip(names, gradients[len(unique_inputs) :], strict=True))
    return output, weights, input_grads, param_grads


@pytest.mark.parametrize("seed", range(NUM_MHA_CONFIGS))
def test_multihead_attention_matches_torch(seed):
    config = sample_mha_config(seed)
    theirs, ours = build_pair(config)
    generator = torch.Generator().manual_seed(seed)
    inputs = make_inputs(config, generator)
    masks = (make_attn_mask(config, generator), make_padding_mask(config, generator))
    out_shape = inputs[0].shape[:-1] + (config.embed_dim,)
    cotangents = (
        torch.randn(out_shape, generator=generator, dtype=config.dtype),
        torch.randn(4096, generator=generator, dtype=config.dtype),
    )

    expected = run_forward_backward(theirs, config, inputs, masks, cotangents)
    actual = run_forward_backward(ours, config, inputs, masks, cotangents)

    dtype = config.dtype
    assert_close(actual[0], expected[0], dtype, f"output, {config}")
    if config.need_weights:
        assert_close(actual[1], expected[1], dtype, f"weights, {config}")
    else:
        assert actual[1] is None and expected[1] is None
    for ours_grad, theirs_grad in zip(actual[2], expected[2], strict=True):
        assert_close(ours_grad, theirs_grad, dtype, f"input gradient, {config}")
    assert actual[3].keys() == expected[3].keys()
    for name in expected[3]:
        assert_close(actual[3][name], expected[3][name], dtype, f"grad of {name}, {config}")


def test_parity_configurations_cover_every_option():
    configs = [sample_mha_config(seed) for seed in range(NUM_MHA_CONFIGS)]
    for field in ("bias", "add_bias_kv", "add_zero_attn", "batch_first", "unbatched",
                  "self_attention", "is_causal", "need_weights", "average_attn_weights"):
        values = {getattr(config, field) for config in configs}
        assert values == {True, False}, field
    assert {config.attn_mask_kind for config in configs} == set(ATTN_MASK_KINDS)
    assert {config.padding_mask_kind for config in configs} == set(PADDING_MASK_KINDS)
    assert {config.dtype for config in configs} == {torch.float32, torch.float64}
    assert any(config.kdim != config.embed_dim for config in configs)
    assert any(config.query_len != config.key_len for config in configs)
    assert any(config.is_causal and config.query_len != config.key_len for config in configs)


# ----------------------------------------------------------------------------------------------
# Special cases of MultiHeadAttention, documented one by one
# ----------------------------------------------------------------------------------------------


def _pair(embed_dim=8, num_heads=2, seed=0, **kwargs):
    torch.manual_seed(seed)
    theirs = torch.nn.MultiheadAttention(embed_dim, num_heads, **kwargs)
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    ours = MultiHeadAttention.from_torch(theirs)
    ours.use_fused = False  # the explicit path; the fused one has its own test
    return theirs, ours


@pytest.mark.parametrize("seed", range(10))
def test_dropout_in_training_matches_torch_with_same_seed(seed):
    # Both draw the dropout mask on weights of the same size in the same order.
    theirs, ours = _pair(seed=seed, dropout=0.3, batch_first=True, dtype=torch.float64)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    torch.manual_seed(100 + seed)
    expected = theirs(x, x, x, average_attn_weights=False)
    torch.manual_seed(100 + seed)
    actual = ours(x, x, x, average_attn_weights=False)
    assert_close(actual[0], expected[0], torch.float64, "output")
    assert_close(actual[1], expected[1], torch.float64, "weights")
    assert bool((actual[1] == 0).any())  # dropout did act


def test_fully_masked_rows_documented_behaviour():
    """Query rows with every key masked.

    torch.nn.MultiheadAttention: NaN output and NaN weights for that batch element when
    need_weights=True (explicit path); with need_weights=False the attention output is 0, so
    the module returns out_proj.bias, except in its inference fast path (eval, autograd off,
    batch_first self-attention), which returns NaN again. mha_ref: weights 0 and output
    out_proj.bias on every path.
    """
    theirs, ours = _pair(batch_first=True)
    x = torch.randn(2, 3, 8)
    padding = torch.tensor([[True, True, True], [False, False, True]])  # sequence 0: all padding
    their_out, their_weights = theirs(x, x, x, key_padding_mask=padding)
    assert bool(their_out[0].isnan().all()) and bool(their_weights[0].isnan().all())
    their_out_no_weights, _ = theirs(x, x, x, key_padding_mask=padding, need_weights=False)
    torch.testing.assert_close(their_out_no_weights[0], theirs.out_proj.bias.expand(3, 8))
    theirs.eval()
    with torch.no_grad():  # the inference fast path
        their_out_fast, _ = theirs(x, x, x, key_padding_mask=padding, need_weights=False)
    assert bool(their_out_fast[0].isnan().all())
    torch.testing.assert_close(their_out_fast[1], their_out[1].detach())

    for need_weights in (True, False):
        our_out, our_weights = ours(x, x, x, key_padding_mask=padding, need_weights=need_weights)
        assert not bool(our_out.isnan().any())
        torch.testing.assert_close(our_out[0], ours.out_proj.bias.expand(3, 8))
        torch.testing.assert_close(our_out[1], their_out[1])  # no leak into sequence 1
        if need_weights:
            assert our_weights[0].abs().max().item() == 0.0
            torch.testing.assert_close(our_weights[1], their_weights[1])


def test_is_causal_without_mask_builds_causal_mask_where_torch_raises():
    theirs, ours = _pair(batch_first=True)
    x = torch.randn(2, 4, 8)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        theirs(x, x, x, is_causal=True)
    blocked = torch.ones(4, 4, dtype=torch.bool).triu(diagonal=1)
    expected, expected_weights = theirs(x, x, x, attn_mask=blocked)
    actual, actual_weights = ours(x, x, x, is_causal=True)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(actual_weights, expected_weights)


def test_torch_is_causal_without_mask_depends_on_path():
    """Pins what the docs say: torch raises on its regular path, but its inference fast path
    ignores is_causal without attn_mask and computes NON-causal attention, silently. After
    to_torch(), only an explicit mask keeps the copy causal."""
    theirs, ours = _pair(batch_first=True)
    theirs.eval()
    ours.eval()
    x = torch.randn(2, 4, 8)
    causal, _ = ours(x, x, x, is_causal=True)
    non_causal, _ = ours(x, x, x)
    assert (causal - non_causal).abs().max() > 1e-2  # the two really differ
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        theirs(x, x, x, is_causal=True)  # autograd on: regular path
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either
        for need_weights in (True, False):
            ignored, _ = theirs(x, x, x, is_causal=True, need_weights=need_weights)
            torch.testing.assert_close(ignored, non_causal.detach())  # fast path: not causal
            explicit, _ = ours.to_torch()(x, x, x, attn_mask=~causal_mask(4),
                                          need_weights=need_weights)
            torch.testing.assert_close(explicit, causal.detach())  # the recommended fix


def test_torch_is_causal_quirk_with_extra_keys():
    """torch: is_causal + add_bias_kv + need_weights=False drops attn_mask and applies the
    causal triangle to the appended bias key too, so its two paths disagree. mha_ref follows
    torch on each path."""
    theirs, ours = _pair(batch_first=True, add_bias_kv=True)
    x = torch.randn(2, 4, 8)
    blocked = torch.ones(4, 4, dtype=torch.bool).triu(diagonal=1)
    with_weights, _ = theirs(x, x, x, attn_mask=blocked, is_causal=True, need_weights=True)
    without, _ = theirs(x, x, x, attn_mask=blocked, is_causal=True, need_weights=False)
    assert (with_weights - without).abs().max() > 1e-3  # torch disagrees with itself
    for need_weights, expected in ((True, with_weights), (False, without)):
        ours_out, _ = ours(x, x, x, attn_mask=blocked, is_causal=True, need_weights=need_weights)
        torch.testing.assert_close(ours_out, expected)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("with_padding", [True, False])
def test_is_causal_with_bottom_right_mask_follows_torch(need_weights, with_padding):
    """KV-cache cross-attention, L=3, S=5, bottom-right mask with is_causal=True (E3).

    torch's regular path replaces the mask by the top-left triangle when need_weights=False
    and no key_padding_mask is given; otherwise it applies the mask. mha_ref does the same."""
    theirs, ours = _pair(batch_first=True)
    query, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    bottom_right = ~causal_mask(3, 5, alignment="bottom_right")  # True = blocked
    padding = torch.zeros(2, 5, dtype=torch.bool) if with_padding else None
    kwargs = {"attn_mask": bottom_right, "key_padding_mask": padding, "need_weights": need_weights}
    expected, _ = theirs(query, memory, memory, is_causal=True, **kwargs)
    actual, _ = ours(query, memory, memory, is_causal=True, **kwargs)
    torch.testing.assert_close(actual, expected)
    masked, _ = theirs(query, memory, memory, need_weights=True, attn_mask=bottom_right)
    replaced = not need_weights and not with_padding
    assert ((actual - masked).abs().max() > 0.1) == replaced


def test_is_causal_float_mask_gradient_follows_torch():
    """Where torch drops a float attn_mask for is_causal, neither library gives it a gradient."""
    theirs, ours = _pair(batch_first=True)
    x = torch.randn(2, 4, 8)
    for module in (theirs, ours):
        mask = torch.zeros(4, 4).masked_fill(~causal_mask(4), float("-inf")).requires_grad_()
        out, _ = module(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)
        out.sum().backward()
        assert mask.grad is None
    grads = []
    for module in (theirs, ours):
        mask = torch.zeros(4, 4).masked_fill(~causal_mask(4), float("-inf")).requires_grad_()
        out, _ = module(x, x, x, attn_mask=mask, is_causal=True, need_weights=True)
        out.sum().backward()
        grads.append(mask.grad)
    torch.testing.assert_close(grads[1], grads[0])


def test_fast_path_ignores_is_causal_with_mask_listed_difference():
    """Listed difference: torch's inference fast path applies attn_mask and ignores is_causal;
    mha_ref follows torch's regular path (top-left triangle replaces the mask)."""
    theirs, ours = _pair(batch_first=True)
    theirs.eval()
    ours.eval()
    x = torch.randn(2, 4, 8)
    not_causal = torch.rand(4, 4, generator=torch.Generator().manual_seed(0)) > 0.6
    not_causal.fill_diagonal_(False)
    with torch.no_grad():
        fast, _ = theirs(x, x, x, attn_mask=not_causal, is_causal=True, need_weights=False)
        applied, _ = theirs(x, x, x, attn_mask=not_causal, need_weights=False)
        ours_out, _ = ours(x, x, x, attn_mask=not_causal, is_causal=True, need_weights=False)
        top_left, _ = ours(x, x, x, attn_mask=~causal_mask(4), need_weights=False)
    torch.testing.assert_close(fast, applied)  # torch: the mask, is_causal ignored
    torch.testing.assert_close(ours_out, top_left)  # mha_ref: the causal triangle
    assert (ours_out - fast).abs().max() > 1e-3


@pytest.mark.parametrize("num_heads", [2, 4])
def test_matches_torch_inference_fast_path(num_heads):
    # eval + no_grad + batch_first self-attention: torch uses its fused native kernel.
    theirs, ours = _pair(num_heads=num_heads, batch_first=True)
    theirs.eval()
    ours.eval()
    x = torch.randn(3, 5, 8)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True], [False] * 4 + [True]])
    with torch.no_grad():
        for need_weights in (True, False):
            expected = theirs(x, x, x, key_padding_mask=padding, need_weights=need_weights)
            actual = ours(x, x, x, key_padding_mask=padding, need_weights=need_weights)
            torch.testing.assert_close(actual[0], expected[0], atol=1e-5, rtol=1e-5)
            if need_weights:
                torch.testing.assert_close(actual[1], expected[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("seed", range(20))
def test_fused_path_matches_explicit_path(seed):
    config = sample_mha_config(seed)
    _, ours = build_pair(config)
    generator = torch.Generator().manual_seed(seed)
    inputs = make_inputs(config, generator)
    attn_mask, padding = make_attn_mask(config, generator), make_padding_mask(config, generator)
    kwargs = {"key_padding_mask": padding, "attn_mask": attn_mask, "need_weights": False}
    ours.use_fused = False
    explicit, _ = ours(*inputs, **kwargs)
    ours.use_fused = True
    fused, weights = ours(*inputs, **kwargs)
    assert weights is None
    assert_close(fused, explicit, config.dtype, str(config))


# ----------------------------------------------------------------------------------------------
# scaled_dot_product_attention vs torch.nn.functional.scaled_dot_product_attention
# ----------------------------------------------------------------------------------------------


def _sdpa_case(seed: int):
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    dtype = rng.choice([torch.float32, torch.float64])
    batch_dims = rng.choice([(), (2,), (2, 3)])
    enable_gqa = rng.random() < 0.3
    num_kv_heads = rng.randint(1, 3)
    num_heads = num_kv_heads * rng.randint(1, 3) if enable_gqa else num_kv_heads
    query_len, key_len = rng.randint(1, 6), rng.randint(1, 6)
    head_dim, value_dim = rng.randint(1, 8), rng.randint(1, 8)

    def draw(*shape):
        return torch.randn(*batch_dims, *shape, generator=generator, dtype=dtype).requires_grad_()

    query = draw(num_heads, query_len, head_dim)
    key = draw(num_kv_heads, key_len, head_dim)
    value = draw(num_kv_heads, key_len, value_dim)
    mask_shape = rng.choice(
        [
            (query_len, key_len),
            (1, key_len),
            (num_heads, 1, key_len),
            (*batch_dims, num_heads, query_len, key_len),
            (*batch_dims, 1, query_len, key_len),
        ]
    )
    mask_kind = rng.choice(["none", "bool", "float", "causal"])
    attn_mask, is_causal = None, False
    if mask_kind == "bool":  # fully masked rows allowed: both sides give 0 there
        attn_mask = torch.rand(mask_shape, generator=generator) > 0.3
    elif mask_kind == "float":
        attn_mask = torch.randn(mask_shape, generator=generator, dtype=dtype)
        dropped = torch.rand(mask_shape, generator=generator) < 0.3
        attn_mask = attn_mask.masked_fill(dropped, -math.inf)
    elif mask_kind == "causal":
        is_causal = True
    scale = rng.choice([None, 0.05, 0.7, 2.0])
    kwargs = {"attn_mask": attn_mask, "is_causal": is_causal, "scale": scale,
              "enable_gqa": enable_gqa}
    return dtype, (query, key, value), kwargs


@pytest.mark.parametrize("seed", range(NUM_SDPA_CONFIGS))
def test_sdpa_matches_torch(seed):
    dtype, inputs, kwargs = _sdpa_case(seed)
    expected = F.scaled_dot_product_attention(*inputs, **kwargs)
    actual = scaled_dot_product_attention(*inputs, **kwargs)
    assert_close(actual, expected, dtype, f"output, seed {seed}, {kwargs}")
    cotangent = torch.randn(expected.shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
    expected_grads = torch.autograd.grad((expected * cotangent).sum(), inputs)
    actual_grads = torch.autograd.grad((actual * cotangent).sum(), inputs)
    for name, ours_grad, theirs_grad in zip("qkv", actual_grads, expected_grads, strict=True):
        assert_close(ours_grad, theirs_grad, dtype, f"grad {name}, seed {seed}")


def test_sdpa_cases_cover_options():
    kinds = [_sdpa_case(seed)[2] for seed in range(NUM_SDPA_CONFIGS)]
    assert any(k["enable_gqa"] for k in kinds)
    assert any(k["is_causal"] for k in kinds)
    assert any(k["attn_mask"] is not None and k["attn_mask"].dtype == torch.bool for k in kinds)
    assert any(k["attn_mask"] is not None and k["attn_mask"].is_floating_point() for k in kinds)
    assert {k["scale"] for k in kinds} == {None, 0.05, 0.7, 2.0}


# ----------------------------------------------------------------------------------------------
# GroupedQueryAttention vs F.scaled_dot_product_attention(enable_gqa=True)
# ----------------------------------------------------------------------------------------------


def _reference_gqa(module: GroupedQueryAttention, x: torch.Tensor, kwargs) -> torch.Tensor:
    """The same projections, PyTorch's SDPA with enable_gqa, written with view/transpose."""
    batch, seq_len, _ = x.shape

    def heads(t, count):
        return t.view(batch, seq_len, count, module.head_dim).transpose(1, 2)

    q = heads(module.q_proj(x), module.num_heads)
    k = heads(module.k_proj(x), module.num_kv_heads)
    v = heads(module.v_proj(x), module.num_kv_heads)
    context = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kwargs)
    return module.out_proj(context.transpose(1, 2).reshape(batch, seq_len, module.embed_dim))


@pytest.mark.parametrize("seed", range(NUM_GQA_CONFIGS))
def test_grouped_query_attention_matches_torch_gqa(seed):
    rng = random.Random(seed)
    dtype = rng.choice([torch.float32, torch.float64])
    num_kv_heads = rng.randint(1, 3)
    num_heads = num_kv_heads * rng.randint(1, 3)
    embed_dim = num_heads * rng.randint(1, 4)
    seq_len = rng.randint(1, 6)
    torch.manual_seed(seed)
    module = GroupedQueryAttention(embed_dim, num_heads, num_kv_heads, bias=rng.random() < 0.5,
                                   dtype=dtype)
    x = torch.randn(2, seq_len, embed_dim, dtype=dtype)
    kwargs = rng.choice([{}, {"is_causal": True},
                         {"attn_mask": torch.rand(seq_len, seq_len) > 0.3}])
    expected = _reference_gqa(module, x, kwargs)
    assert module.use_fused  # the default, as in MultiHeadAttention
    for use_fused in (True, False):
        module.use_fused = use_fused
        actual, weights = module(x, **kwargs)
        assert weights is None
        assert_close(actual, expected, dtype, f"use_fused={use_fused}, seed {seed}")
    actual, weights = module(x, need_weights=True, **kwargs)  # always the explicit path
    assert weights.shape == (2, num_heads, seq_len, seq_len)
    assert_close(actual, expected, dtype, f"need_weights=True, seed {seed}")


@pytest.mark.parametrize("use_fused", [True, False])
def test_gqa_float_mask_of_other_dtype_is_cast_on_both_paths(use_fused):
    torch.manual_seed(0)
    module = GroupedQueryAttention(8, 4, 2, use_fused=use_fused)
    x = torch.randn(2, 3, 8)
    mask = torch.randn(3, 3)
    expected, _ = module(x, attn_mask=mask)
    actual, _ = module(x, attn_mask=mask.to(torch.float16))  # F.sdpa alone would raise
    torch.testing.assert_close(actual, module(x, attn_mask=mask.half().float())[0])
    assert (actual - expected).abs().max() < 1e-2


# ----------------------------------------------------------------------------------------------
# Edge cases: empty sequences, scale types
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize(("query_len", "key_len"), [(0, 0), (0, 3), (3, 0)])
def test_empty_sequences_with_is_causal_match_torch(query_len, key_len, need_weights):
    theirs, ours = _pair(batch_first=True)
    ours.use_fused = True
    query, memory = torch.randn(2, query_len, 8), torch.randn(2, key_len, 8)
    blocked = ~causal_mask(query_len, key_len)  # (query_len, key_len), possibly empty
    expected, expected_weights = theirs(query, memory, memory, attn_mask=blocked,
                                        need_weights=need_weights)
    actual, actual_weights = ours(query, memory, memory, is_causal=True,
                                  need_weights=need_weights)
    assert actual.shape == (2, query_len, 8)
    torch.testing.assert_close(actual, expected)  # no keys: 0 here, out_proj.bias after it
    if need_weights:
        assert actual_weights.shape == expected_weights.shape == (2, query_len, key_len)


@pytest.mark.parametrize(("query_len", "key_len"), [(0, 0), (0, 3), (3, 0)])
def test_sdpa_empty_sequences_with_is_causal_match_torch(query_len, key_len):
    query = torch.randn(2, 2, query_len, 4)
    key, value = torch.randn(2, 2, key_len, 4), torch.randn(2, 2, key_len, 5)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=True)
    actual = scaled_dot_product_attention(query, key, value, is_causal=True)
    assert actual.shape == expected.shape == (2, 2, query_len, 5)
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("scale", [np.float32(0.25), np.float64(0.25), np.int64(2),
                                   torch.tensor(0.25), torch.tensor(0.25, dtype=torch.float64)])
def test_sdpa_scale_types_accepted_like_torch(scale):
    generator = torch.Generator().manual_seed(0)
    query, key, value = (torch.randn(2, 3, 4, generator=generator) for _ in range(3))
    expected = F.scaled_dot_product_attention(query, key, value, scale=scale)
    torch.testing.assert_close(scaled_dot_product_attention(query, key, value, scale=scale),
                               expected)


# ----------------------------------------------------------------------------------------------
# Holes of the drop-in promise (issue 11), each against torch
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dropout", [1.0, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_dropout_one_like_torch(dropout, need_weights):
    theirs, ours = _pair(dropout=dropout)
    x = torch.randn(3, 2, 8)
    for module in (theirs, ours):
        module.train()
    expected, _ = theirs(x, x, x, need_weights=need_weights)
    actual, _ = ours(x, x, x, need_weights=need_weights)
    torch.testing.assert_close(actual, expected)  # out_proj.bias everywhere
    assert ours.dropout is dropout


def test_dropout_outside_unit_interval_listed_difference():
    """torch accepts any dropout, then raises (>1) or silently ignores a negative value."""
    torch.nn.MultiheadAttention(8, 2, dropout=1.5)
    theirs = torch.nn.MultiheadAttention(8, 2, dropout=-0.5)
    x = torch.randn(3, 2, 8)
    ignored, _ = theirs(x, x, x, need_weights=True)
    no_dropout, _ = theirs.eval()(x, x, x, need_weights=True)
    torch.testing.assert_close(ignored, no_dropout)
    with pytest.raises(RuntimeError):
        theirs.train()(x, x, x, need_weights=False)
    for dropout in (1.5, -0.5):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            MultiHeadAttention(8, 2, dropout=dropout)


def test_zero_kdim_and_vdim_like_torch():
    theirs, ours = _pair(kdim=0, vdim=0)
    query, empty = torch.randn(3, 2, 8), torch.randn(5, 2, 0)
    torch.testing.assert_close(ours(query, empty, empty)[0], theirs(query, empty, empty)[0])


def test_float16_weights_path_listed_difference():
    """torch's need_weights=True path computes float16 scores in float16 (NaN past 65504);
    mha_ref computes them in float32, like both libraries' need_weights=False path."""
    theirs = torch.nn.MultiheadAttention(8, 1, bias=False, dtype=torch.float16)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.eye(8).repeat(3, 1))
        theirs.out_proj.weight.copy_(torch.eye(8))
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.full((2, 1, 8), 200.0, dtype=torch.float16)
    assert theirs(x, x, x, need_weights=True)[0].isnan().all()
    torch.testing.assert_close(theirs(x, x, x, need_weights=False)[0], x)
    for need_weights in (True, False):
        torch.testing.assert_close(ours(x, x, x, need_weights=need_weights)[0], x)


def test_empty_inputs_listed_difference():
    """torch fails on an empty batch with a 3-D attn_mask and need_weights=False (an internal
    reshape of 0 elements), and its fast path returns no weights for an empty batch."""
    theirs, ours = _pair(batch_first=True)
    x = torch.randn(0, 3, 8)
    mask = torch.zeros(0, 3, 3, dtype=torch.bool)  # (batch * num_heads, L, S) with batch = 0
    with pytest.raises(RuntimeError, match="cannot reshape tensor of 0 elements"):
        theirs(x, x, x, attn_mask=mask, need_weights=False)
    assert ours(x, x, x, attn_mask=mask, need_weights=False)[0].shape == (0, 3, 8)
    theirs.eval()
    ours.eval()
    with torch.no_grad():
        assert theirs(x, x, x, need_weights=True)[1] is None
        assert ours(x, x, x, need_weights=True)[1].shape == (0, 3, 3)
