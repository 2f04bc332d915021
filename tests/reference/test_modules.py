"""The modules: causal progression, MultiHeadAttention as a drop-in, GQA, device choice."""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn.functional as F

from mha_ref import (
    CausalAttention,
    CausalMultiHeadAttention,
    GroupedQueryAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    causal_mask,
    pick_device,
    scaled_dot_product_attention,
    wrapper_to_batched,
)

MHA_VARIANTS = [
    {},
    {"bias": False},
    {"kdim": 5, "vdim": 3},
    {"add_bias_kv": True},
    {"add_bias_kv": True, "add_zero_attn": True, "bias": False, "kdim": 7},
    {"batch_first": True},
]

# ----------------------------------------------------------------------------------------------
# MultiHeadAttention: same parameters, names, shapes and init as torch
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", MHA_VARIANTS)
def test_state_dict_keys_shapes_and_seeded_init_match_torch(kwargs):
    torch.manual_seed(42)
    theirs = torch.nn.MultiheadAttention(8, 2, **kwargs)
    torch.manual_seed(42)
    ours = MultiHeadAttention(8, 2, **kwargs)
    their_state, our_state = theirs.state_dict(), ours.state_dict()
    assert list(our_state) == list(their_state)
    for name, tensor in their_state.items():
        assert torch.equal(our_state[name], tensor), name
    for attribute in ("embed_dim", "kdim", "vdim", "num_heads", "head_dim", "dropout",
                      "batch_first", "_qkv_same_embed_dim", "add_zero_attn"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    assert isinstance(ours.out_proj, torch.nn.Linear)


def test_packed_and_separate_parameter_layout():
    packed = MultiHeadAttention(8, 2)
    assert packed.in_proj_weight.shape == (24, 8)
    assert packed.in_proj_bias.shape == (24,)
    assert packed.q_proj_weight is None and packed.k_proj_weight is None
    separate = MultiHeadAttention(8, 2, kdim=5, vdim=3)
    assert separate.in_proj_weight is None
    assert separate.q_proj_weight.shape == (8, 8)
    assert separate.k_proj_weight.shape == (8, 5)
    assert separate.v_proj_weight.shape == (8, 3)
    with_bias_kv = MultiHeadAttention(8, 2, add_bias_kv=True)
    assert with_bias_kv.bias_k.shape == (1, 1, 8) and with_bias_kv.bias_v.shape == (1, 1, 8)


def test_init_statistics():
    torch.manual_seed(0)
    module = MultiHeadAttention(64, 4, add_bias_kv=True)
    assert module.in_proj_bias.abs().max().item() == 0.0
    assert module.out_proj.bias.abs().max().item() == 0.0
    # xavier_uniform_ on (192, 64): U(-a, a) with a = sqrt(6 / (64 + 192))
    bound = (6 / (64 + 192)) ** 0.5
    assert module.in_proj_weight.abs().max().item() <= bound
    assert module.in_proj_weight.abs().max().item() > 0.9 * bound


@pytest.mark.parametrize("kwargs", MHA_VARIANTS)
def test_load_state_dict_both_ways(kwargs):
    theirs = torch.nn.MultiheadAttention(8, 2, **kwargs)
    ours = MultiHeadAttention(8, 2, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    back = torch.nn.MultiheadAttention(8, 2, **kwargs)
    back.load_state_dict(ours.state_dict())
    for name, tensor in theirs.state_dict().items():
        assert torch.equal(back.state_dict()[name], tensor)


def test_from_torch_and_to_torch_keep_config_mode_dtype():
    theirs = torch.nn.MultiheadAttention(
        6, 3, dropout=0.2, kdim=4, vdim=5, batch_first=True, dtype=torch.float64
    ).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    assert (ours.kdim, ours.vdim, ours.dropout, ours.batch_first) == (4, 5, 0.2, True)
    assert ours.q_proj_weight.dtype == torch.float64
    assert not ours.training
    back = ours.train().to_torch()
    assert isinstance(back, torch.nn.MultiheadAttention) and back.training
    query, key, value = torch.randn(2, 3, 6), torch.randn(2, 4, 4), torch.randn(2, 4, 5)
    query, key, value = query.double(), key.double(), value.double()
    back.eval()
    ours.eval()
    torch.testing.assert_close(ours(query, key, value)[0], back(query, key, value)[0])


def test_in_proj_weight_is_packed_query_key_value(generator):
    module = MultiHeadAttention(6, 2, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        module.in_proj_bias.normal_(generator=generator)
    x = torch.randn(1, 4, 6, generator=generator, dtype=torch.float64)
    memory = torch.randn(1, 5, 6, generator=generator, dtype=torch.float64)
    weight, bias = module.in_proj_weight, module.in_proj_bias
    # Rows 0:E project queries, E:2E keys, 2E:3E values.
    q = x @ weight[0:6].T + bias[0:6]
    k = memory @ weight[6:12].T + bias[6:12]
    v = memory @ weight[12:18].T + bias[12:18]
    heads = [
        torch.softmax(q[0, :, h * 3 : h * 3 + 3] @ k[0, :, h * 3 : h * 3 + 3].T / 3**0.5, dim=-1)
        @ v[0, :, h * 3 : h * 3 + 3]
        for h in range(2)
    ]
    expected = module.out_proj(torch.cat(heads, dim=-1))
    output, _ = module(x, memory, memory)
    torch.testing.assert_close(output[0], expected, atol=1e-12, rtol=0)
    # Swapping the key and value blocks changes the result: the order matters.
    swapped = torch.cat([weight[0:6], weight[12:18], weight[6:12]])
    with torch.no_grad():
        module.in_proj_weight.copy_(swapped)
    assert (module(x, memory, memory)[0] - output).abs().max() > 1e-3


def test_need_weights_false_returns_none_and_averaging(generator):
    module = MultiHeadAttention(8, 4, batch_first=True)
    x = torch.randn(2, 5, 8, generator=generator)
    memory = torch.randn(2, 3, 8, generator=generator)
    output, weights = module(x, memory, memory, need_weights=False)
    assert output.shape == (2, 5, 8) and weights is None
    _, averaged = module(x, memory, memory)
    _, per_head = module(x, memory, memory, average_attn_weights=False)
    assert averaged.shape == (2, 5, 3)
    assert per_head.shape == (2, 4, 5, 3)
    torch.testing.assert_close(averaged, per_head.mean(dim=1))
    torch.testing.assert_close(per_head.sum(dim=-1), torch.ones(2, 4, 5))


def test_unbatched_equals_batch_of_one(generator):
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(5, 8, generator=generator)
    padding = torch.tensor([False, False, False, True, True])
    out, weights = module(x, x, x, key_padding_mask=padding, average_attn_weights=False)
    out_b, weights_b = module(x[None], x[None], x[None], key_padding_mask=padding[None],
                              average_attn_weights=False)
    assert out.shape == (5, 8) and weights.shape == (2, 5, 5)
    torch.testing.assert_close(out, out_b[0])
    torch.testing.assert_close(weights, weights_b[0])


def test_batch_first_only_changes_layout(generator):
    seq_first = MultiHeadAttention(8, 2)
    batch_first = MultiHeadAttention(8, 2, batch_first=True)
    batch_first.load_state_dict(seq_first.state_dict())
    x = torch.randn(5, 3, 8, generator=generator)  # (seq_len, batch, embed_dim)
    out_seq_first, _ = seq_first(x, x, x)
    out_batch_first, _ = batch_first(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
    torch.testing.assert_close(out_batch_first, out_seq_first.transpose(0, 1))


def test_is_causal_builds_top_left_mask_for_short_query(generator):
    module = MultiHeadAttention(4, 2, batch_first=True)
    query = torch.randn(1, 2, 4, generator=generator)
    memory = torch.randn(1, 5, 4, generator=generator)
    _, weights = module(query, memory, memory, is_causal=True)
    assert torch.equal(weights[0] > 0, causal_mask(2, 5))


def test_eval_is_deterministic_and_train_applies_dropout(generator):
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 2, dropout=0.5, batch_first=True)
    reference = MultiHeadAttention(8, 2, dropout=0.0, batch_first=True)
    reference.load_state_dict(module.state_dict())
    x = torch.randn(2, 6, 8, generator=generator)
    module.eval()
    first, second = module(x, x, x)[0], module(x, x, x)[0]
    assert torch.equal(first, second)
    torch.testing.assert_close(first, reference(x, x, x)[0])
    module.train()
    assert (module(x, x, x)[0] - module(x, x, x)[0]).abs().max() > 1e-4


def test_fused_path_is_the_default_without_weights_in_both_modules():
    assert MultiHeadAttention(8, 2).use_fused and GroupedQueryAttention(8, 4, 2).use_fused
    assert not MultiHeadAttention(8, 2, use_fused=False).use_fused
    assert not GroupedQueryAttention(8, 4, 2, use_fused=False).use_fused


def test_double_backward_on_the_explicit_path():
    # use_fused=False is the documented way to higher-order gradients: gradgradcheck passes.
    torch.manual_seed(0)
    module = MultiHeadAttention(4, 2, batch_first=True, dtype=torch.float64, use_fused=False)
    x = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    padding = torch.tensor([[False, False, True]])

    def attend(x):
        return module(x, x, x, key_padding_mask=padding, need_weights=False)[0]

    assert torch.autograd.gradgradcheck(attend, (x,))


def test_double_backward_fails_on_the_fused_path_without_mask():
    # Why the docs point to use_fused=False: torch 2.13's CPU flash kernel has no double backward.
    torch.manual_seed(0)
    module = MultiHeadAttention(4, 2, batch_first=True, dtype=torch.float64)
    x = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    output = module(x, x, x, need_weights=False)[0]
    (grad,) = torch.autograd.grad(output.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="not implemented"):
        torch.autograd.grad(grad.sum(), x)


def test_float_mask_of_other_dtype_is_cast_where_torch_raises(generator):
    # A documented difference from torch: float64 masks with float32 inputs are cast.
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(2, 3, 8, generator=generator)
    mask = torch.randn(3, 3, generator=generator)  # float32
    padding = torch.randn(2, 3, generator=generator)
    expected, _ = theirs(x, x, x, attn_mask=mask, key_padding_mask=padding)
    with pytest.raises(RuntimeError):
        theirs(x, x, x, attn_mask=mask.double(), key_padding_mask=padding.double())
    for need_weights in (True, False):
        actual, _ = ours(x, x, x, attn_mask=mask.double(), key_padding_mask=padding.double(),
                         need_weights=need_weights)
        torch.testing.assert_close(actual, expected)


def test_parameter_count_does_not_depend_on_num_heads():
    counts = {
        heads: sum(p.numel() for p in MultiHeadAttention(64, heads).parameters())
        for heads in (1, 2, 4, 8, 16, 64)
    }
    assert set(counts.values()) == {4 * 64 * 64 + 4 * 64}


# ----------------------------------------------------------------------------------------------
# The causal progression
# ----------------------------------------------------------------------------------------------


def test_causal_attention_equals_sdpa_with_causal_mask(generator):
    torch.manual_seed(3)
    head = CausalAttention(3, 4, context_length=8, dropout=0.0, qkv_bias=True)
    x = torch.randn(2, 5, 3, generator=generator)
    expected = scaled_dot_product_attention(
        head.W_query(x), head.W_key(x), head.W_value(x), is_causal=True
    )
    torch.testing.assert_close(head(x), expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda: CausalAttention(3, 4, 6, 0.0),
        lambda: MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3),
        lambda: CausalMultiHeadAttention(3, 4, 6, 0.0, num_heads=2),
    ],
)
def test_causal_modules_do_not_look_ahead(make, generator):
    module = make()
    x = torch.randn(1, 6, 3, generator=generator)
    changed = x.clone()
    changed[0, 4:] += 10.0  # change the last two tokens only
    torch.testing.assert_close(module(x)[0, :4], module(changed)[0, :4])
    assert (module(x)[0, 4:] - module(changed)[0, 4:]).abs().max() > 1e-3


def test_two_meanings_of_d_out(textbook_batch):
    wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)  # d_out per head
    batched = CausalMultiHeadAttention(3, 2, 6, 0.0, num_heads=2)  # d_out in total
    assert wrapper(textbook_batch).shape == (2, 6, 4)
    assert batched(textbook_batch).shape == (2, 6, 2)
    assert batched.head_dim == 1


def test_parameter_creation_order():
    names = [name for name, _ in CausalMultiHeadAttention(3, 4, 6, 0.0, 2).named_parameters()]
    assert names == ["W_query.weight", "W_key.weight", "W_value.weight",
                     "out_proj.weight", "out_proj.bias"]
    wrapper = MultiHeadAttentionWrapper(3, 4, 6, 0.0, 2)
    wrapper_names = [name for name, _ in wrapper.named_parameters()]
    assert wrapper_names[:3] == ["heads.0.W_query.weight", "heads.0.W_key.weight",
                                 "heads.0.W_value.weight"]


def test_causal_mask_buffer_is_not_saved():
    module = CausalAttention(3, 2, 6, 0.0)
    assert "causal_mask" not in module.state_dict()
    assert torch.equal(module.causal_mask, ~torch.triu(torch.ones(6, 6), diagonal=1).bool())


def test_wrapper_heads_are_concatenated(generator):
    wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3)
    x = torch.randn(2, 4, 3, generator=generator)
    expected = torch.cat([head(x) for head in wrapper.heads], dim=-1)
    torch.testing.assert_close(wrapper(x), expected)


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_wrapper_to_batched_gives_same_output(qkv_bias, generator):
    wrapper = MultiHeadAttentionWrapper(5, 3, 7, 0.0, num_heads=4, qkv_bias=qkv_bias).double()
    batched = wrapper_to_batched(wrapper)
    assert isinstance(batched, CausalMultiHeadAttention)
    assert batched.d_out == 12 and batched.head_dim == 3
    assert torch.equal(batched.out_proj.weight, torch.eye(12, dtype=torch.float64))
    x = torch.randn(2, 7, 5, generator=generator, dtype=torch.float64)
    torch.testing.assert_close(batched(x), wrapper(x), atol=1e-12, rtol=0)


def test_causal_modules_eval_disables_dropout(generator):
    module = CausalMultiHeadAttention(3, 4, 6, 0.5, num_heads=2)
    x = torch.randn(2, 6, 3, generator=generator)
    module.eval()
    assert torch.equal(module(x), module(x))
    module.train()
    assert not torch.equal(module(x), module(x))


# ----------------------------------------------------------------------------------------------
# GroupedQueryAttention
# ----------------------------------------------------------------------------------------------


def test_gqa_shapes_and_kv_cache_size():
    module = GroupedQueryAttention(12, num_heads=6, num_kv_heads=2)
    assert module.head_dim == 2
    assert module.k_proj.weight.shape == (4, 12) and module.v_proj.weight.shape == (4, 12)
    assert module.kv_cache_size_per_token() == 2 * 2 * 2
    assert GroupedQueryAttention(12, 6, 1).kv_cache_size_per_token() == 4  # MQA
    assert GroupedQueryAttention(12, 6, 6).kv_cache_size_per_token() == 24  # MHA: 2 * embed_dim


def test_gqa_with_all_kv_heads_equals_multihead_attention(generator):
    gqa = GroupedQueryAttention(8, 4, 4, dtype=torch.float64)
    mha = MultiHeadAttention(8, 4, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([gqa.q_proj.weight, gqa.k_proj.weight,
                                            gqa.v_proj.weight]))
        mha.in_proj_bias.copy_(torch.cat([gqa.q_proj.bias, gqa.k_proj.bias, gqa.v_proj.bias]))
        mha.out_proj.load_state_dict(gqa.out_proj.state_dict())
    x = torch.randn(2, 5, 8, generator=generator, dtype=torch.float64)
    out, weights = gqa(x, is_causal=True, need_weights=True)
    expected, expected_weights = mha(x, x, x, is_causal=True, average_attn_weights=False)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(weights, expected_weights, atol=1e-12, rtol=0)


def test_mqa_heads_share_keys(generator):
    module = GroupedQueryAttention(8, 4, 1, dtype=torch.float64)
    x = torch.randn(1, 3, 8, generator=generator, dtype=torch.float64)
    _, weights = module(x, need_weights=True)
    assert weights.shape == (1, 4, 3, 3)
    keys = module.k_proj(x)[0]  # (3, head_dim): the one key head every query head uses
    queries = module.q_proj(x)[0]  # (3, 4 * head_dim)
    for head in range(4):
        q_head = queries[:, head * 2 : head * 2 + 2]
        expected = torch.softmax(q_head @ keys.T / 2**0.5, dim=-1)
        torch.testing.assert_close(weights[0, head], expected, atol=1e-12, rtol=0)


def test_gqa_cross_attention_and_seq_first(generator):
    module = GroupedQueryAttention(8, 4, 2, batch_first=False)
    query = torch.randn(3, 2, 8, generator=generator)  # (L, N, E)
    memory = torch.randn(5, 2, 8, generator=generator)  # (S, N, E)
    output, weights = module(query, memory, need_weights=True)
    assert output.shape == (3, 2, 8)
    assert weights.shape == (2, 4, 3, 5)


# ----------------------------------------------------------------------------------------------
# pick_device
# ----------------------------------------------------------------------------------------------


def test_pick_device_default(monkeypatch):
    monkeypatch.delenv("MHA_REF_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available() and torch.backends.mps.is_available():
        expected = "mps"
    assert pick_device().type == expected


def test_pick_device_picks_mps_when_available_and_no_cuda(monkeypatch):
    monkeypatch.delenv("MHA_REF_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device() == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device() == torch.device("cuda")  # CUDA first, as before


def test_pick_device_mps_requested_but_unavailable(monkeypatch):
    monkeypatch.setenv("MHA_REF_DEVICE", "mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ValueError, match="MPS"):
        pick_device()


def test_pick_device_env_override(monkeypatch):
    monkeypatch.setenv("MHA_REF_DEVICE", "cpu")
    assert pick_device() == torch.device("cpu")


def test_pick_device_bad_env_value(monkeypatch):
    monkeypatch.setenv("MHA_REF_DEVICE", "not-a-device")
    with pytest.raises(ValueError, match="MHA_REF_DEVICE"):
        pick_device()


def test_functional_and_module_agree_on_devices_given_by_pick_device(monkeypatch):
    monkeypatch.setenv("MHA_REF_DEVICE", "cpu")
    device = pick_device()
    module = MultiHeadAttention(4, 2, device=device)
    x = torch.randn(3, 1, 4, device=device)
    assert module(x, x, x)[0].device == device
    assert F.scaled_dot_product_attention(x, x, x).device == device


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_multihead_attention_matches_torch_on_cuda():
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(16, 4, batch_first=True, device="cuda",
                                         dtype=torch.float64)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(3, 7, 16, device="cuda", dtype=torch.float64)
    padding = torch.zeros(3, 7, dtype=torch.bool, device="cuda")
    padding[1, 5:] = True
    expected = theirs(x, x, x, key_padding_mask=padding, average_attn_weights=False)
    actual = ours(x, x, x, key_padding_mask=padding, average_attn_weights=False)
    torch.testing.assert_close(actual[0], expected[0], atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(actual[1], expected[1], atol=1e-10, rtol=1e-10)
    ours.use_fused = True
    fused, _ = ours(x, x, x, key_padding_mask=padding, need_weights=False)
    torch.testing.assert_close(fused, expected[0], atol=1e-10, rtol=1e-10)


# ----------------------------------------------------------------------------------------------
# The drop-in inside PyTorch's own code: subclass, encoder layers, quantization, autocast,
# TorchScript, torch.compile
# ----------------------------------------------------------------------------------------------


def test_is_a_torch_multihead_attention_with_the_same_attributes():
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, add_bias_kv=True, kdim=5)
    torch.manual_seed(0)
    ours = MultiHeadAttention(8, 2, add_bias_kv=True, kdim=5)
    assert isinstance(ours, torch.nn.MultiheadAttention)
    # the constructor skips nn.MultiheadAttention.__init__: it must set everything that sets
    assert set(vars(theirs)) <= set(vars(ours))
    assert set(vars(ours)) - set(vars(theirs)) == {"use_fused"}
    assert type(ours.out_proj) is type(theirs.out_proj)
    pairs = zip(ours.named_parameters(), theirs.named_parameters(), strict=True)
    for (name, ours_p), (_, theirs_p) in pairs:
        assert torch.equal(ours_p, theirs_p), name


@pytest.mark.parametrize("num_layers", [None, 2])
@pytest.mark.parametrize("with_padding", [False, True])
def test_inside_transformer_encoder_at_inference(num_layers, with_padding):
    """Hole E4: eval + no_grad used to fail with AttributeError 'merge_masks'."""
    torch.manual_seed(0)
    theirs = torch.nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True)
    ours = torch.nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True)
    ours.load_state_dict(theirs.state_dict())
    ours.self_attn = MultiHeadAttention.from_torch(ours.self_attn)
    if num_layers is not None:
        theirs = torch.nn.TransformerEncoder(theirs, num_layers)
        ours = torch.nn.TransformerEncoder(ours, num_layers)
    x = torch.randn(2, 5, 16)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2]) if with_padding else None
    for mode in ("train", "eval"):
        getattr(theirs, mode)()
        getattr(ours, mode)()
        with torch.no_grad():
            expected = theirs(x, src_key_padding_mask=padding)
            actual = ours(x, src_key_padding_mask=padding)
        if expected.is_nested:
            expected, actual = expected.to_padded_tensor(0.0), actual.to_padded_tensor(0.0)
        torch.testing.assert_close(actual, expected)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_quantize_dynamic_leaves_out_proj_alone():
    model = torch.nn.Sequential(MultiHeadAttention(8, 2))
    quantized = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear})
    x = torch.randn(3, 2, 8)
    expected = model[0](x, x, x)[0]
    torch.testing.assert_close(quantized[0](x, x, x)[0], expected)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
def test_autocast_bfloat16_matches_torch(need_weights, batch_first):
    """Hole E5: bf16 activations with fp32 weights under CPU autocast used to raise."""
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    ours = MultiHeadAttention.from_torch(theirs)
    linear = torch.nn.Linear(8, 8)
    x = torch.randn(3, 4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        hidden = linear(x)  # bfloat16
        expected, expected_weights = theirs(hidden, hidden, hidden, need_weights=need_weights)
        actual, actual_weights = ours(hidden, hidden, hidden, need_weights=need_weights)
    assert actual.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(actual, expected, atol=2e-2, rtol=2e-2)
    if need_weights:
        assert actual_weights.dtype == expected_weights.dtype
        torch.testing.assert_close(actual_weights, expected_weights, atol=2e-2, rtol=2e-2)


def test_autocast_sdpa_casts_like_torch():
    x = torch.randn(1, 2, 3, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = F.scaled_dot_product_attention(x, x, x)
        actual = scaled_dot_product_attention(x, x, x)
    assert actual.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(actual, expected, atol=2e-2, rtol=2e-2)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_jit_script_is_not_supported_but_to_torch_scripts():
    """Listed difference: TorchScript cannot compile the checked forward; to_torch() can."""
    ours = MultiHeadAttention(8, 2)
    with pytest.raises(RuntimeError):
        torch.jit.script(ours)
    scripted = torch.jit.script(ours.to_torch())
    x = torch.randn(3, 2, 8)
    torch.testing.assert_close(scripted(x, x, x)[0], ours(x, x, x)[0])


def _has_c_compiler() -> bool:
    import shutil

    return any(shutil.which(name) for name in ("cc", "gcc", "clang", "g++"))


@pytest.mark.compile
@pytest.mark.skipif(not _has_c_compiler(), reason="torch.compile on CPU needs a C++ compiler")
def test_torch_compile_fullgraph_equals_eager():
    """torch.compile(fullgraph=True) compiles a forward with no graph break (about 20 s)."""
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 3, 8)
    compiled = torch.compile(module, fullgraph=True)
    actual, weights = compiled(x, x, x)
    expected, expected_weights = module(x, x, x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(weights, expected_weights)


def test_encoder_layer_fast_path_does_not_call_forward_listed_difference():
    """In eval under no_grad, nn.TransformerEncoderLayer runs PyTorch's fused kernel with the
    module's weights: MultiHeadAttention.forward is not called, so fully masked rows give NaN
    there (PyTorch's result), where forward would give out_proj.bias."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True).eval()
    layer.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
    calls = []
    layer.self_attn.forward = lambda *args, **kwargs: calls.append(1)  # a spy that returns None
    x = torch.randn(1, 3, 8)
    blocked = torch.ones(3, 3, dtype=torch.bool)  # every key blocked for every query
    with torch.no_grad():
        fused = layer(x, src_mask=blocked)
    assert calls == [] and fused.isnan().all()
    del layer.self_attn.forward
    direct, _ = layer.self_attn(x, x, x, attn_mask=blocked, need_weights=False)
    torch.testing.assert_close(direct, layer.self_attn.out_proj.bias.expand(1, 3, 8))


#: (batch, query_len, key_len) and the masks of each call, as a training or serving loop would
#: change them: the first change of shape makes torch.compile mark the sizes dynamic, and the
#: masks after it are traced with symbolic sizes (where a message built on the success path
#: broke the graph: str.join over symbolic shapes)
COMPILE_SEQUENCE = [
    ((2, 3, 3), None),
    ((2, 5, 5), None),
    ((2, 5, 5), "bool"),
    ((3, 7, 7), "bool"),
    ((3, 7, 7), "float"),
    ((3, 7, 9), "bool"),
    ((4, 6, 6), "key_padding_mask"),
    ((4, 6, 6), "bool and key_padding_mask"),
    ((2, 4, 4), "is_causal with attn_mask"),
]


def _compile_call(shape, masks, generator):
    batch, query_len, key_len = shape
    x = torch.randn(batch, query_len, 8, generator=generator)
    memory = torch.randn(batch, key_len, 8, generator=generator)
    kwargs = {}
    if masks in ("bool", "bool and key_padding_mask"):
        kwargs["attn_mask"] = torch.rand(query_len, key_len, generator=generator) > 0.7
    if masks == "float":
        kwargs["attn_mask"] = torch.randn(query_len, key_len, generator=generator)
    if masks in ("key_padding_mask", "bool and key_padding_mask"):
        kwargs["key_padding_mask"] = torch.rand(batch, key_len, generator=generator) > 0.7
    if masks == "is_causal with attn_mask":
        kwargs["attn_mask"] = ~causal_mask(query_len, key_len)  # True = blocked
        kwargs["is_causal"] = True
    return (x, memory, memory), kwargs


@pytest.mark.compile
@pytest.mark.parametrize("need_weights", [True, False])
def test_torch_compile_fullgraph_through_shapes_and_masks(need_weights):
    """fullgraph=True through a sequence of shapes and masks, with automatic dynamic shapes,
    as torch.nn.MultiheadAttention compiles through the same sequence.

    The "eager" backend: the graph breaks this guards against happen while Dynamo traces the
    Python code, whatever compiles the graph afterwards (the inductor test above pays for one
    compilation; this sequence recompiles several times)."""
    import torch._dynamo

    outputs = {}
    for cls in (MultiHeadAttention, torch.nn.MultiheadAttention):
        torch._dynamo.reset()
        torch.manual_seed(0)
        module = cls(8, 2, batch_first=True)
        compiled = torch.compile(module, fullgraph=True, backend="eager")
        generator = torch.Generator().manual_seed(1)
        results = []
        for shape, masks in COMPILE_SEQUENCE:
            args, kwargs = _compile_call(shape, masks, generator)
            kwargs["need_weights"] = need_weights
            actual = compiled(*args, **kwargs)[0]
            torch.testing.assert_close(actual, module(*args, **kwargs)[0])
            results.append(actual)
        outputs[cls] = results
    for ours, theirs in zip(outputs[MultiHeadAttention], outputs[torch.nn.MultiheadAttention],
                            strict=True):
        torch.testing.assert_close(ours, theirs)
    # the checks are as strict when compiled: a wrong mask is reported with its message
    torch._dynamo.reset()
    compiled = torch.compile(MultiHeadAttention(8, 2, batch_first=True), fullgraph=True,
                             backend="eager")
    x = torch.randn(2, 5, 8)
    compiled(x, x, x)
    with pytest.raises(Exception, match=r"attn_mask must have shape \(query_len, key_len\)"):
        compiled(x, x, x, attn_mask=torch.ones(4, 4, dtype=torch.bool))


def test_is_causal_without_mask_compiles_fullgraph_too():
    """Where torch's module raises (is_causal needs attn_mask there), ours builds the mask;
    compiled, after a change of shape as well."""
    import torch._dynamo

    torch._dynamo.reset()
    module = MultiHeadAttention(8, 2, batch_first=True)
    compiled = torch.compile(module, fullgraph=True, backend="eager")
    for length in (3, 5, 6):
        x = torch.randn(2, length, 8)
        expected = module(x, x, x, attn_mask=~causal_mask(length, length))[0]
        torch.testing.assert_close(compiled(x, x, x, is_causal=True)[0], expected)


# ----------------------------------------------------------------------------------------------
# Validation once per call: the boundary checks, the internal path trusts what it built
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def check_calls(monkeypatch):
    """Every call of a ``require_*`` check of ``mha_ref._validation``: (check, argument name)."""
    import mha_ref._validation as validation

    calls = []
    for name, function in list(vars(validation).items()):
        if name.startswith("require_") and callable(function):

            def spy(*args, _function=function, _name=name, **kwargs):
                argument = args[0] if args and isinstance(args[0], str) else ""
                if _name in ("require_same_batch",):  # (query, other_name, other, ...)
                    argument = args[1]
                calls.append((_name, argument))
                return _function(*args, **kwargs)

            monkeypatch.setattr(validation, name, spy)
    return calls


def _validation_cases():
    from mha_ref import RotaryEmbedding, tiled_attention

    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    q = torch.randn(2, 2, 5, 4)
    mha = MultiHeadAttention(8, 2, batch_first=True)
    gqa = GroupedQueryAttention(8, 4, 2, rope=RotaryEmbedding(2))
    blocked = torch.rand(5, 5) > 0.5
    padding = torch.zeros(2, 5, dtype=torch.bool)
    cache = gqa.new_cache(2, 8)
    return {
        "MultiHeadAttention, weights": (
            lambda: mha(x, x, x, attn_mask=blocked, key_padding_mask=padding),
            {"query", "key", "value", "attn_mask", "key_padding_mask"},
        ),
        "MultiHeadAttention, fused": (
            lambda: mha(x, x, x, attn_mask=blocked, need_weights=False),
            {"query", "key", "value", "attn_mask"},
        ),
        "GroupedQueryAttention, fused": (
            lambda: gqa(x, is_causal=True), {"query", "key", "value"}
        ),
        "GroupedQueryAttention, weights": (
            lambda: gqa(x, attn_mask=~blocked, need_weights=True),
            {"query", "key", "value", "attn_mask"},
        ),
        "GroupedQueryAttention.decode": (lambda: gqa.decode(x, cache), {"query"}),
        "scaled_dot_product_attention": (
            lambda: scaled_dot_product_attention(q, q, q, attn_mask=~blocked),
            {"query", "key", "value", "attn_mask"},
        ),
        "tiled_attention": (
            lambda: tiled_attention(q, q, q, is_causal=True), {"query", "key", "value"}
        ),
    }


@pytest.mark.parametrize("case", list(_validation_cases()))
def test_each_input_is_checked_once_per_call(case, check_calls):
    """The public call checks each of its inputs, once; the steps after it (the fused call,
    the explicit path, the head split, the rotary embedding of positions the module built)
    check nothing again."""
    call, tensors = _validation_cases()[case]
    check_calls.clear()
    call()
    repeated = {c: n for c, n in collections.Counter(check_calls).items() if n > 1}
    assert not repeated, f"{case}: checked more than once: {repeated}"
    checked_tensors = {argument for check, argument in check_calls if check == "require_tensor"}
    assert checked_tensors == tensors, f"{case}: checked {checked_tensors}"
    # nothing the call built itself is checked (a causal mask's lengths, its own positions)
    arguments = {argument for _, argument in check_calls if argument}
    passed = {"is_causal", "enable_gqa", "dropout_p", "block_size", "return_lse"}
    others = arguments - tensors - passed
    assert not others, f"{case}: checked what the call built itself: {others}"
    assert len(check_calls) >= 2 * len(tensors)  # the spy sees the checks: more than the types
