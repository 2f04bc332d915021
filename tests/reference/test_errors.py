"""Every kind of bad input raises ValueError/TypeError naming the argument, the value and a fix.

Each test checks the exception type and key words of the message: the argument name and the
value that was given (and, where there is one, the fix).
"""

from __future__ import annotations

import contextlib
import time
import warnings

import numpy as np
import pytest
import torch

from mha_ref import (
    CausalAttention,
    CausalMultiHeadAttention,
    GroupedQueryAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    allowed_to_additive,
    allowed_to_blocked,
    causal_mask,
    merge_heads,
    padding_mask,
    pick_device,
    repeat_kv_heads,
    scaled_dot_product_attention,
    split_heads,
    wrapper_to_batched,
)


@contextlib.contextmanager
def raises(exception: type[Exception], *words: str):
    """Expect ``exception`` whose message contains every one of ``words``."""
    with pytest.raises(exception) as info:
        yield
    message = str(info.value)
    missing = [word for word in words if word not in message]
    assert not missing, f"{missing} not in message: {message}"


# ----------------------------------------------------------------------------------------------
# Constructor arguments
# ----------------------------------------------------------------------------------------------


def test_embed_dim_not_divisible_by_num_heads():
    with raises(ValueError, "embed_dim (=10)", "num_heads (=3)", "3.33", "1, 2, 5, 10"):
        MultiHeadAttention(10, 3)


@pytest.mark.parametrize("embed_dim", [2**31 + 1, 10**18 + 1])
def test_divisors_of_a_huge_embed_dim_are_quick(embed_dim):
    start = time.perf_counter()
    with raises(ValueError, f"embed_dim (={embed_dim})", "num_heads (=2)", "divisors"):
        MultiHeadAttention(embed_dim, 2)
    assert time.perf_counter() - start < 2.0  # the search was O(embed_dim): minutes or more


def test_divisors_found_above_the_square_root():
    with raises(ValueError, "divisors of 2147483649: 1, 3, 715827883, 2147483649."):
        MultiHeadAttention(2**31 + 1, 2)  # 2**31 + 1 = 3 * 715827883


def test_many_divisors_listed_near_num_heads():
    with raises(ValueError, "divisors of 2147483648: 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, ... "
                            "(32 in all)"):
        MultiHeadAttention(2**31, 3)


def test_embed_dim_not_divisible_in_gqa():
    with raises(ValueError, "embed_dim (=10)", "num_heads (=4)"):
        GroupedQueryAttention(10, 4, 2)


def test_d_out_not_divisible_by_num_heads():
    with raises(ValueError, "d_out (=5)", "num_heads (=2)", "1, 5"):
        CausalMultiHeadAttention(3, 5, 6, 0.0, num_heads=2)


@pytest.mark.parametrize("value", [0, -4])
def test_non_positive_embed_dim(value):
    with raises(ValueError, "embed_dim", f"embed_dim={value}", "positive"):
        MultiHeadAttention(value, 1)


def test_non_positive_num_heads():
    with raises(ValueError, "num_heads", "num_heads=0"):
        MultiHeadAttention(8, 0)


def test_non_integer_embed_dim():
    with raises(TypeError, "embed_dim", "float", "8.0"):
        MultiHeadAttention(8.0, 2)


def test_bool_num_heads():
    with raises(TypeError, "num_heads", "bool", "True"):
        MultiHeadAttention(8, True)


def test_numpy_sizes_accepted_as_in_torch():
    ours = MultiHeadAttention(np.int64(8), np.int32(2), dropout=np.float32(0.25))
    theirs = torch.nn.MultiheadAttention(np.int64(8), np.int32(2), dropout=np.float32(0.25))
    assert (ours.head_dim, ours.dropout) == (theirs.head_dim, theirs.dropout) == (4, 0.25)
    assert GroupedQueryAttention(np.int64(8), np.int64(4), np.int64(2)).head_dim == 2


def test_negative_kdim():
    with raises(ValueError, "kdim", "kdim=-1"):
        MultiHeadAttention(8, 2, kdim=-1)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: CausalAttention(0, 2, 6, 0.0), "d_in=0"),
        (lambda: CausalAttention(3, -1, 6, 0.0), "d_out=-1"),
        (lambda: CausalAttention(3, 2, 0, 0.0), "context_length=0"),
        (lambda: MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=0), "num_heads=0"),
        (lambda: CausalMultiHeadAttention(3, 4, -6, 0.0, num_heads=2), "context_length=-6"),
    ],
)
def test_non_positive_sizes_of_causal_modules(make, name):
    with raises(ValueError, name, "positive"):
        make()


@pytest.mark.parametrize("dropout", [1.5, -0.1, float("nan")])
def test_dropout_outside_unit_interval(dropout):
    with raises(ValueError, "dropout", f"dropout={dropout}", "[0, 1]"):
        MultiHeadAttention(8, 2, dropout=dropout)


def test_dropout_of_wrong_type():
    with raises(TypeError, "dropout", "str"):
        CausalAttention(3, 2, 6, "0.1")


def test_num_kv_heads_must_divide_num_heads():
    with raises(ValueError, "num_kv_heads (=3)", "num_heads (=4)", "1, 2, 4"):
        GroupedQueryAttention(8, 4, 3)


def test_non_positive_num_kv_heads():
    with raises(ValueError, "num_kv_heads", "num_kv_heads=0"):
        GroupedQueryAttention(8, 4, 0)


# ----------------------------------------------------------------------------------------------
# Forward inputs of MultiHeadAttention
# ----------------------------------------------------------------------------------------------


def test_query_wrong_rank():
    module = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 4, 8)
    with raises(ValueError, "query", "4-D", "(2, 3, 4, 8)"):
        module(x, x, x)


def test_key_rank_differs_from_query():
    module = MultiHeadAttention(8, 2)
    with raises(ValueError, "key", "2-D", "3-D"):
        module(torch.randn(3, 2, 8), torch.randn(3, 8), torch.randn(3, 8))


def test_query_not_a_tensor():
    module = MultiHeadAttention(2, 1)
    with raises(TypeError, "query", "list", "torch.as_tensor"):
        module([[1.0, 2.0]], torch.randn(1, 2), torch.randn(1, 2))


def test_integer_query():
    module = MultiHeadAttention(2, 1)
    x = torch.ones(3, 2, dtype=torch.int64)
    with raises(TypeError, "query", "torch.int64", "float"):
        module(x, x, x)


def test_batch_size_mismatch_hints_batch_first():
    module = MultiHeadAttention(8, 2)  # batch_first=False by default, like torch
    query = torch.randn(2, 5, 8)  # the user meant (batch=2, seq=5)
    memory = torch.randn(2, 7, 8)  # (batch=2, seq=7)
    with raises(ValueError, "batch size", "batch_first=True", "(2, 5, 8)", "(2, 7, 8)"):
        module(query, memory, memory)


def test_batch_size_mismatch_without_layout_hint():
    module = MultiHeadAttention(8, 2, batch_first=True)
    with raises(ValueError, "batch size", "query", "key", "(2, 5, 8)", "(3, 4, 8)"):
        module(torch.randn(2, 5, 8), torch.randn(3, 4, 8), torch.randn(3, 4, 8))


def test_batch_first_hint_absent_when_it_would_not_help():
    module = MultiHeadAttention(8, 2, batch_first=True)
    with pytest.raises(ValueError) as info:
        module(torch.randn(2, 5, 8), torch.randn(3, 4, 8), torch.randn(3, 4, 8))
    assert "did you mean" not in str(info.value)


def test_query_features_differ_from_embed_dim():
    module = MultiHeadAttention(8, 2)
    x = torch.randn(5, 2, 6)
    with raises(ValueError, "query", "6 features", "embed_dim=8"):
        module(x, x, x)


def test_key_features_differ_from_kdim():
    module = MultiHeadAttention(8, 2, kdim=4, vdim=4)
    query = torch.randn(5, 2, 8)
    with raises(ValueError, "key", "8 features", "kdim=4"):
        module(query, torch.randn(3, 2, 8), torch.randn(3, 2, 4))


def test_value_features_differ_from_vdim():
    module = MultiHeadAttention(8, 2, vdim=3)
    query = torch.randn(5, 2, 8)
    with raises(ValueError, "value", "5 features", "vdim=3"):
        module(query, query, torch.randn(5, 2, 5))


def test_key_value_length_mismatch():
    module = MultiHeadAttention(8, 2, batch_first=True)
    query = torch.randn(2, 5, 8)
    with raises(ValueError, "key and value", "length 4", "length 6"):
        module(query, torch.randn(2, 4, 8), torch.randn(2, 6, 8))


def test_attn_mask_wrong_shape():
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(3, 5, 8)
    with raises(ValueError, "attn_mask", "(query_len, key_len) = (5, 5)",
                "(batch * num_heads, query_len, key_len) = (6, 5, 5)", "(3, 5, 5)",
                "repeat_interleave(num_heads, dim=0)"):
        module(x, x, x, attn_mask=torch.zeros(3, 5, 5, dtype=torch.bool))


@pytest.mark.parametrize("heads", [2, 1])
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32], ids=["bool", "float"])
def test_attn_mask_4d_gets_the_reshape_fix(heads, dtype):
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(3, 5, 8)
    g = torch.Generator().manual_seed(0)
    blocked = (torch.rand(3, heads, 5, 5, generator=g) < 0.5) & ~torch.eye(5, dtype=torch.bool)
    mask = blocked if dtype == torch.bool else allowed_to_additive(~blocked)
    fix = "attn_mask.reshape(6, 5, 5)"
    if heads == 1:
        fix = "attn_mask.expand(3, 2, 5, 5).reshape(6, 5, 5)"
    with pytest.raises(ValueError) as info:
        module(x, x, x, attn_mask=mask)
    message = str(info.value)
    for words in ["attn_mask", f"attn_mask.shape=(3, {heads}, 5, 5)",
                  "(batch * num_heads, query_len, key_len) = (6, 5, 5)", f"pass {fix}."]:
        assert words in message, message
    assert (f"pass ~{fix}." in message) == (dtype == torch.bool)  # SDPA's bool polarity
    fixed = mask.expand(3, 2, 5, 5).reshape(6, 5, 5)  # the suggested fix
    out, weights = module(x, x, x, attn_mask=fixed, average_attn_weights=False)
    expected, _ = module.to_torch()(x, x, x, attn_mask=fixed)
    torch.testing.assert_close(out, expected)
    # head h of batch element n got the mask's [n, h] (or [n, 0]) matrix
    blocked_per_head = blocked.expand(3, 2, 5, 5)
    assert (weights[blocked_per_head] == 0).all() and (weights[~blocked_per_head] > 0).all()


def test_attn_mask_wrong_lengths():
    module = MultiHeadAttention(8, 2)
    x = torch.randn(5, 3, 8)
    with raises(ValueError, "attn_mask", "(5, 5)", "(4, 5)", "query and key lengths"):
        module(x, x, x, attn_mask=torch.zeros(4, 5, dtype=torch.bool))


def test_attn_mask_integer_dtype():
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(3, 5, 8)
    with raises(TypeError, "attn_mask", "torch.int64", ".bool()"):
        module(x, x, x, attn_mask=torch.zeros(5, 5, dtype=torch.int64))


def test_key_padding_mask_wrong_shape():
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(3, 5, 8)
    with raises(ValueError, "key_padding_mask", "(batch, key_len) = (3, 5)", "(5, 3)",
                "With batch_first=True the inputs are read as (batch, seq_len, features)",
                "if your inputs are (seq_len, batch, features), they are being misread too: "
                "build the module with batch_first=False",
                "Otherwise the mask is transposed: pass key_padding_mask.T"):
        module(x, x, x, key_padding_mask=torch.zeros(5, 3, dtype=torch.bool))


def test_key_padding_mask_looks_transposed_because_input_is_batch_first():
    module = MultiHeadAttention(8, 2)  # batch_first=False, like torch
    x = torch.randn(3, 5, 8)  # the user meant (batch=3, seq=5): read as seq=3, batch=5
    message = (
        "key_padding_mask must have shape (batch, key_len) = (5, 3), got "
        "key_padding_mask.shape=(3, 5). With batch_first=False the inputs are read as "
        "(seq_len, batch, features), so batch=5 and key_len=3, and the mask is (key_len, batch). "
        "First check the layout: if your inputs are (batch, seq_len, features), they are being "
        "misread too: build the module with batch_first=True, and the mask is right as it "
        "is. Otherwise the mask is transposed: pass key_padding_mask.T, since key_padding_mask is "
        "(batch, key_len) whatever batch_first is."
    )
    with raises(ValueError, message):
        module(x, x, x, key_padding_mask=torch.zeros(3, 5, dtype=torch.bool))


def test_key_padding_mask_integer_dtype():
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(3, 5, 8)
    with raises(TypeError, "key_padding_mask", "torch.int32", "key_padding_mask.bool()"):
        module(x, x, x, key_padding_mask=torch.zeros(3, 5, dtype=torch.int32))


def test_key_padding_mask_of_lengths_gets_the_padding_mask_fix():
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 5, 8)
    lengths = torch.tensor([5, 3])  # lengths instead of a mask
    with pytest.raises(TypeError) as info:
        module(x, x, x, key_padding_mask=lengths)
    message = str(info.value)
    for words in ["key_padding_mask", "torch.int64", "shape (2,)",
                  "key_padding_mask=mha_ref.allowed_to_blocked(mha_ref.padding_mask(lengths, "
                  "max_len=5))"]:
        assert words in message, message
    assert ".bool()" not in message  # that fix would give a wrong mask
    fixed = allowed_to_blocked(padding_mask(lengths, max_len=5))  # the suggested fix
    assert fixed.tolist() == [[False] * 5, [False] * 3 + [True] * 2]
    out, _ = module(x, x, x, key_padding_mask=fixed)
    expected, _ = module.to_torch()(x, x, x, key_padding_mask=fixed)
    torch.testing.assert_close(out, expected)


def test_unbatched_integer_key_padding_mask_keeps_the_bool_hint():
    module = MultiHeadAttention(8, 2)
    x = torch.randn(5, 8)  # unbatched: key_padding_mask is (key_len,)
    with raises(TypeError, "key_padding_mask", "torch.int64", "key_padding_mask.bool()"):
        module(x, x, x, key_padding_mask=torch.zeros(5, dtype=torch.int64))


def test_mask_not_a_tensor():
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(3, 5, 8)
    with raises(TypeError, "key_padding_mask", "list"):
        module(x, x, x, key_padding_mask=[[True] * 5] * 3)


def test_input_dtype_differs_from_weights():
    module = MultiHeadAttention(8, 2)
    x = torch.randn(5, 2, 8, dtype=torch.float64)
    with raises(TypeError, "query.dtype", "torch.float64", "torch.float32", "module.to("):
        module(x, x, x)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("bool_mask", ["attn_mask", "key_padding_mask"])
def test_bool_and_float_masks_together_accepted_where_torch_warns(bool_mask, need_weights):
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 5, 8)
    attn_blocked = ~causal_mask(5)  # (5, 5), True = blocked
    padding_blocked = allowed_to_blocked(padding_mask([5, 3], max_len=5))  # (2, 5)
    if bool_mask == "attn_mask":
        masks = {"attn_mask": attn_blocked,
                 "key_padding_mask": allowed_to_additive(~padding_blocked)}
    else:
        masks = {"attn_mask": allowed_to_additive(~attn_blocked),
                 "key_padding_mask": padding_blocked}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # mha_ref: no warning
        ours, _ = module(x, x, x, need_weights=need_weights, **masks)
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask is deprecated"):
        theirs, _ = module.to_torch()(x, x, x, need_weights=need_weights, **masks)
    torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize(
    ("name", "mask"),
    [
        ("attn_mask", torch.zeros(3, 3, device="meta")),
        ("attn_mask", torch.zeros(3, 3, dtype=torch.bool, device="meta")),
        ("key_padding_mask", torch.zeros(2, 3, dtype=torch.bool, device="meta")),
    ],
)
def test_mha_mask_on_another_device(name, mask, need_weights):
    module = MultiHeadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 3, 8)
    with raises(ValueError, f"{name} is on device meta but query is on cpu",
                f"{name}.to(query.device)"):
        module(x, x, x, need_weights=need_weights, **{name: mask})


@pytest.mark.parametrize("need_weights", [True, False])
def test_gqa_mask_on_another_device(need_weights):
    module = GroupedQueryAttention(8, 4, 2)
    x = torch.randn(2, 3, 8)
    with raises(ValueError, "attn_mask is on device meta but query is on cpu",
                "attn_mask.to(query.device)"):
        module(x, attn_mask=torch.ones(3, 3, dtype=torch.bool, device="meta"),
               need_weights=need_weights)


@pytest.mark.parametrize("use_fused", [True, False])
def test_gqa_mask_errors_are_the_same_on_both_paths(use_fused):
    module = GroupedQueryAttention(8, 4, 2, use_fused=use_fused)
    x = torch.randn(2, 3, 8)
    with raises(ValueError, "attn_mask", "(2, 4, 3, 3)", "(3, 4)"):
        module(x, attn_mask=torch.ones(3, 4, dtype=torch.bool))
    with raises(ValueError, "attn_mask", "is_causal=True"):
        module(x, attn_mask=torch.ones(3, 3, dtype=torch.bool), is_causal=True)
    with raises(TypeError, "attn_mask", "torch.int64"):
        module(x, attn_mask=torch.ones(3, 3, dtype=torch.int64))


def test_sdpa_mask_on_another_device():
    x = torch.randn(2, 3, 4)
    with raises(ValueError, "attn_mask is on device meta but query is on cpu",
                "attn_mask.to(query.device)"):
        scaled_dot_product_attention(x, x, x, attn_mask=torch.ones(3, 3, device="meta"))


def test_sdpa_key_on_another_device():
    x = torch.randn(2, 3, 4)
    with raises(ValueError, "key is on device meta but query is on cpu", "key.to(query.device)"):
        scaled_dot_product_attention(x, torch.empty(2, 3, 4, device="meta"), x)


def test_input_device_differs_from_weights():
    module = MultiHeadAttention(8, 2)
    x = torch.empty(5, 2, 8, device="meta")
    with raises(ValueError, "query", "meta", "cpu", ".to("):
        module(x, x, x)


def test_gqa_input_features():
    module = GroupedQueryAttention(8, 4, 2)
    with raises(ValueError, "query", "6 features", "embed_dim=8"):
        module(torch.randn(2, 3, 6))


# ----------------------------------------------------------------------------------------------
# Causal modules
# ----------------------------------------------------------------------------------------------


def test_sequence_longer_than_context_length():
    module = CausalAttention(3, 2, context_length=6, dropout=0.0)
    with raises(ValueError, "8 tokens", "context_length=6", "context_length>=8"):
        module(torch.randn(1, 8, 3))


def test_causal_input_features_differ_from_d_in():
    module = CausalMultiHeadAttention(3, 4, 6, 0.0, num_heads=2)
    with raises(ValueError, "x", "5 features", "d_in=3"):
        module(torch.randn(1, 4, 5))


def test_causal_input_wrong_rank():
    module = CausalAttention(3, 2, 6, 0.0)
    with raises(ValueError, "x", "2-D", "(batch, num_tokens, d_in)", "unsqueeze(0)"):
        module(torch.randn(4, 3))


def test_wrapper_to_batched_wrong_type():
    with raises(TypeError, "wrapper", "CausalAttention"):
        wrapper_to_batched(CausalAttention(3, 2, 6, 0.0))


def test_from_torch_wrong_type():
    with raises(TypeError, "module", "Linear"):
        MultiHeadAttention.from_torch(torch.nn.Linear(2, 2))


# ----------------------------------------------------------------------------------------------
# scaled_dot_product_attention
# ----------------------------------------------------------------------------------------------


def test_gqa_attn_mask_and_is_causal_together():
    module = GroupedQueryAttention(8, 4, 2)
    x = torch.randn(1, 3, 8)
    with raises(ValueError, "attn_mask", "is_causal=True", "causal_mask"):
        module(x, attn_mask=causal_mask(3), is_causal=True)


@pytest.mark.parametrize("scale", [float("inf"), float("-inf"), float("nan")])
def test_sdpa_scale_not_finite(scale):
    x = torch.randn(1, 3, 4)
    with raises(ValueError, "scale must be a finite number", f"scale={scale}", "scale=None",
                "0 gives uniform weights"):
        scaled_dot_product_attention(x, x, x, scale=scale)


@pytest.mark.parametrize(
    ("scale", "given"),
    [("0.5", "str ('0.5')"),
     (torch.tensor([0.5]), "a tensor of shape (1,)")],
)
def test_sdpa_scale_not_a_number(scale, given):
    x = torch.randn(1, 3, 4)
    with raises(TypeError, "scale must be a real number or None", given, "scale=None"):
        scaled_dot_product_attention(x, x, x, scale=scale)


def test_sdpa_dropout_p_outside_unit_interval():
    x = torch.randn(1, 3, 4)
    with raises(ValueError, "dropout_p", "dropout_p=1.2"):
        scaled_dot_product_attention(x, x, x, dropout_p=1.2)


def test_sdpa_query_key_head_dim_differ():
    with raises(ValueError, "query", "key", "head_dim", "(1, 3, 4)", "(1, 3, 5)"):
        scaled_dot_product_attention(torch.randn(1, 3, 4), torch.randn(1, 3, 5),
                                     torch.randn(1, 3, 5))


def test_sdpa_rank_too_small():
    with raises(ValueError, "query", "1-D", "at least 2"):
        scaled_dot_product_attention(torch.randn(4), torch.randn(3, 4), torch.randn(3, 4))


def test_sdpa_gqa_heads_not_multiple():
    query = torch.randn(1, 4, 3, 2)
    key = torch.randn(1, 3, 3, 2)
    with raises(ValueError, "enable_gqa", "query.shape[-3]=4", "key.shape[-3]=3", "1, 2, 4"):
        scaled_dot_product_attention(query, key, key, enable_gqa=True)


def test_sdpa_mask_does_not_broadcast():
    x = torch.randn(2, 3, 4)
    with raises(ValueError, "attn_mask", "(2, 3, 3)", "(3, 4)"):
        scaled_dot_product_attention(x, x, x, attn_mask=torch.ones(3, 4, dtype=torch.bool))


def test_sdpa_integer_mask():
    x = torch.randn(2, 3, 4)
    with raises(TypeError, "attn_mask", "torch.uint8"):
        scaled_dot_product_attention(x, x, x, attn_mask=torch.ones(3, 3, dtype=torch.uint8))


def test_sdpa_batch_dims_do_not_broadcast():
    with raises(ValueError, "query", "key", "(2,)", "(3,)", "broadcast"):
        scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(3, 3, 4),
                                     torch.randn(3, 3, 4))


# ----------------------------------------------------------------------------------------------
# Reshapes and masks
# ----------------------------------------------------------------------------------------------


def test_repeat_kv_heads_not_multiple():
    key = torch.randn(1, 2, 3, 4)
    with raises(ValueError, "num_heads=3", "key.shape[-3]=2", "1, 3"):
        repeat_kv_heads(key, key, num_heads=3)


def test_split_heads_not_divisible():
    with raises(ValueError, "embed_dim", "(=12)", "num_heads (=5)", "1, 2, 3, 4, 6, 12"):
        split_heads(torch.randn(2, 3, 12), 5)


def test_split_heads_wrong_rank():
    with raises(ValueError, "x", "4-D", "(batch, seq_len, embed_dim)"):
        split_heads(torch.randn(2, 2, 3, 12), 2)


def test_merge_heads_wrong_rank():
    with raises(ValueError, "x", "3-D", "(batch, num_heads, seq_len, head_dim)"):
        merge_heads(torch.randn(2, 3, 12))


def test_unknown_alignment():
    with raises(ValueError, "alignment", "'diagonal'", "'top_left'", "'bottom_right'"):
        causal_mask(3, 4, alignment="diagonal")


def test_causal_mask_negative_length():
    with raises(ValueError, "key_len", "key_len=-1", "non-negative"):
        causal_mask(3, -1)


def test_padding_length_longer_than_max_len():
    with raises(ValueError, "max_len (=3)", "lengths=[2, 5]", "max_len>=5"):
        padding_mask([2, 5], max_len=3)


def test_padding_negative_length():
    with raises(ValueError, "lengths", "non-negative", "lengths=[2, -1]"):
        padding_mask([2, -1])


def test_padding_float_lengths():
    with raises(TypeError, "lengths", "torch.float32", ".long()"):
        padding_mask(torch.tensor([2.0, 3.0]))


def test_mask_conversion_of_integer_mask():
    with raises(TypeError, "mask", "torch.int64"):
        allowed_to_blocked(torch.ones(2, 2, dtype=torch.int64))


def test_additive_conversion_needs_bool():
    with raises(TypeError, "mask", "torch.float32", "already additive"):
        allowed_to_additive(torch.zeros(2, 2))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_pick_device_cuda_requested_but_unavailable(monkeypatch):
    monkeypatch.setenv("MHA_REF_DEVICE", "cuda")
    with raises(ValueError, "MHA_REF_DEVICE", "'cuda'", "cpu"):
        pick_device()


# ----------------------------------------------------------------------------------------------
# Flags: is_causal and enable_gqa are bool, as torch's scaled_dot_product_attention requires
# ----------------------------------------------------------------------------------------------

#: what a flag may be given as by mistake; each is truthy or falsy, and none is a bool
NOT_BOOLS = ["False", "True", 1, 0, np.bool_(True), torch.tensor(True), None, 1.0]


def _flag_calls():
    """(label, flag name, call(flag value)) for every function and module taking the flag."""
    torch.manual_seed(0)
    q = torch.randn(1, 2, 3, 4)
    x = torch.randn(1, 3, 8)
    mha = MultiHeadAttention(8, 2, batch_first=True)
    gqa = GroupedQueryAttention(8, 2, 1)
    from mha_ref import tiled_attention

    return [
        ("sdpa", "is_causal", lambda v: scaled_dot_product_attention(q, q, q, is_causal=v)),
        ("sdpa", "enable_gqa", lambda v: scaled_dot_product_attention(q, q, q, enable_gqa=v)),
        ("tiled", "is_causal", lambda v: tiled_attention(q, q, q, is_causal=v)),
        ("mha weights", "is_causal", lambda v: mha(x, x, x, is_causal=v)),
        ("mha fused", "is_causal", lambda v: mha(x, x, x, is_causal=v, need_weights=False)),
        ("gqa", "is_causal", lambda v: gqa(x, is_causal=v)),
        ("gqa weights", "is_causal", lambda v: gqa(x, is_causal=v, need_weights=True)),
    ]


@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
def test_a_flag_that_is_not_a_bool_raises_type_error(value):
    """``is_causal="False"`` used to apply the causal mask (a non-empty string is truthy)."""
    for label, flag, call in _flag_calls():
        with raises(TypeError, f"{flag} must be a bool", type(value).__name__, "bool(...)"):
            call(value)
        assert label  # every call site checked


@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
def test_torch_sdpa_takes_only_a_bool_too(value):
    """What torch accepts: F.scaled_dot_product_attention rejects every non-bool flag."""
    q = torch.randn(1, 2, 3, 4)
    for flag in ("is_causal", "enable_gqa"):
        with pytest.raises(TypeError, match=f"'{flag}' must be bool"):
            torch.nn.functional.scaled_dot_product_attention(q, q, q, **{flag: value})


def test_a_bool_flag_still_works_everywhere():
    for _label, _flag, call in _flag_calls():
        call(True)
        call(False)
