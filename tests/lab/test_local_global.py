"""Example 25's tools (mha_ref.tutorial.real_models.local_global): the KV-cache and RoPE
arithmetic against hand-computed values, the ring-buffer decode against the masked forward pass
on a small layer with QK-norm and RoPE, the sequences and scores on known inputs, and the range
of ordinary token ids against Gemma 3's tokenizer (skipped without the model, except where
``MHA_REF_REQUIRE_REAL_MODEL=1``)."""

from __future__ import annotations

import pytest
import torch
from model_files import require_model_file

from mha_ref import (
    GroupedQueryAttention,
    QKNorm,
    RotaryEmbedding,
    kv_cache_bytes_per_token,
    sliding_window_mask,
)
from mha_ref.tutorial.real_models.local_global import (
    GEMMA3_ORDINARY_IDS,
    SMOLLM2_FIRST_ID,
    SMOLLM2_ORDINARY_IDS,
    copy_after_gap,
    decode_against_forward,
    induction_scores_at,
    kv_cache_bytes,
    ring_buffer_attention,
    slow_pairs,
)

# ------------------------------------------------------------------------------------------------
# arithmetic
# ------------------------------------------------------------------------------------------------


def test_kv_cache_bytes_by_hand():
    # 3 global blocks keep 1,000 tokens, 15 local ones 512: (3 * 1000 + 15 * 512) token-layers,
    # each 2 (key, value) * 1 head * 256 features * 2 bytes
    assert kv_cache_bytes(18, 1, 256, 1000, 15, 512) == 1024 * (3000 + 7680)
    # shorter than the window: local and global layers hold the same
    assert kv_cache_bytes(18, 1, 256, 300, 15, 512) == kv_cache_bytes(18, 1, 256, 300)


def test_every_layer_global_is_the_per_token_figure_times_the_length():
    per_token = kv_cache_bytes_per_token(30, 3, 64, torch.bfloat16)
    assert kv_cache_bytes(30, 3, 64, 8192) == per_token * 8192


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"local_layers": 19, "window": 512}, "local_layers must be an int from 0 to"),
        ({"local_layers": 15}, "local layers need window"),
        ({"local_layers": 15, "window": 0}, "local layers need window"),
    ],
)
def test_kv_cache_bytes_refuses_bad_layers(kwargs, match):
    with pytest.raises(ValueError, match=match):
        kv_cache_bytes(18, 1, 256, 1000, **kwargs)


def test_slow_pairs_by_hand():
    # head_dim 8, base 10,000: pairs turn 1, 0.1, 0.01, 0.001 radians per position, a full turn
    # every 6.3, 63, 628, 6283 positions
    assert slow_pairs(8, 10_000.0, 100) == 2
    assert slow_pairs(8, 10_000.0, 7) == 3
    assert slow_pairs(8, 10_000.0, 10_000) == 0
    with pytest.raises(ValueError, match="seq_len"):
        slow_pairs(8, 10_000.0, 0)


# ------------------------------------------------------------------------------------------------
# the ring buffer
# ------------------------------------------------------------------------------------------------


def _layer(seq_len: int) -> GroupedQueryAttention:
    torch.manual_seed(0)
    rope = RotaryEmbedding(16, max_len=seq_len, pairing="half")
    layer = GroupedQueryAttention(
        24, 4, 1, bias=False, rope=rope, head_dim=16, scale=0.25, dtype=torch.float64,
        qk_norm=QKNorm(16, kind="rms", dtype=torch.float64),
    ).eval()
    with torch.no_grad():  # gains away from 1, so a missing QK-norm would show
        layer.qk_norm.query_norm.weight.uniform_(0.5, 2.0)
        layer.qk_norm.key_norm.weight.uniform_(0.5, 2.0)
    return layer


def test_ring_buffer_equals_the_masked_layer():
    seq_len, window = 20, 6
    layer = _layer(seq_len)
    x = torch.randn(1, seq_len, 24, dtype=torch.float64)
    with torch.no_grad():
        masked, _ = layer(x, attn_mask=sliding_window_mask(seq_len, window=window))
        decoded = ring_buffer_attention(layer, x, window)
    assert decoded.shape == (1, seq_len, 24)
    torch.testing.assert_close(decoded, masked, rtol=0, atol=1e-12)


def test_ring_buffer_differs_from_a_global_layer_once_it_wraps():
    seq_len, window = 20, 6
    layer = _layer(seq_len)
    x = torch.randn(1, seq_len, 24, dtype=torch.float64)
    with torch.no_grad():
        full, _ = layer(x, is_causal=True)
        decoded = ring_buffer_attention(layer, x, window)
    # equal while the buffer holds every token, different once it has dropped one
    torch.testing.assert_close(decoded[:, :window], full[:, :window], rtol=0, atol=1e-12)
    assert (decoded[:, window:] - full[:, window:]).abs().amax(dim=-1).min() > 1e-3


def test_ring_buffer_refuses_a_batch():
    layer = _layer(4)
    with pytest.raises(ValueError, match="one sequence"):
        ring_buffer_attention(layer, torch.zeros(2, 4, 24, dtype=torch.float64), 2)


@pytest.mark.parametrize(
    ("tokens", "prompt_len", "match"),
    [
        (torch.zeros(5, dtype=torch.long), 2, r"one sequence, shape \(1, seq_len\), got \(5,\)"),
        (torch.zeros(1, 5, dtype=torch.long), 0, "prompt_len must be an int from 1 to 4"),
        (torch.zeros(1, 5, dtype=torch.long), 5, "prompt_len must be an int from 1 to 4"),
        (torch.zeros(1, 5, dtype=torch.long), True, "prompt_len must be an int"),
    ],
)
def test_the_whole_model_decode_check_refuses_bad_input(tokens, prompt_len, match):
    with pytest.raises(ValueError, match=match):
        decode_against_forward(None, tokens, prompt_len)  # refused before the model is used


# ------------------------------------------------------------------------------------------------
# sequences and scores
# ------------------------------------------------------------------------------------------------


def test_copy_after_gap_repeats_the_start_after_distance_tokens():
    tokens = copy_after_gap(10, 4, [0, 1], bos_id=2, ids=(100, 200))
    assert tokens.shape == (2, 1 + 10 + 4)
    assert (tokens[:, 0] == 2).all()
    assert torch.equal(tokens[:, 11:], tokens[:, 1:5])
    assert tokens[:, 1:].min() >= 100 and tokens[:, 1:].max() < 200
    assert not torch.equal(tokens[0], tokens[1])  # two seeds, two sequences
    with pytest.raises(ValueError, match="copy_len <= distance"):
        copy_after_gap(3, 4, [0], bos_id=2, ids=(100, 200))


def test_induction_score_is_the_weight_on_the_token_after_the_earlier_copy():
    distance, copy_len = 6, 3
    seq_len = 1 + distance + copy_len
    weights = torch.zeros(1, 2, seq_len, seq_len)
    for i in range(copy_len - 1):
        query = 1 + distance + i
        weights[0, 0, query, query - distance + 1] = 1.0  # head 0: induction
        weights[0, 1, query, query - distance] = 1.0  # head 1: the copy itself, not after it
    assert induction_scores_at(weights, distance, copy_len).tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="weights must be"):
        induction_scores_at(weights[..., :-1], distance, copy_len)


# ------------------------------------------------------------------------------------------------
# Gemma 3's ordinary ids
# ------------------------------------------------------------------------------------------------


@pytest.mark.xdist_group("gemma3")
def test_ordinary_ids_are_every_piece_between_the_byte_tokens_and_the_added_tokens():
    from mha_ref.tutorial.real_models import gemma3

    require_model_file(gemma3, "Gemma 3")
    tokenizer = gemma3.load_gemma3("cpu").tokenizer
    added = tokenizer._backend.get_added_tokens_decoder()  # control and user-defined tokens
    low, high = GEMMA3_ORDINARY_IDS
    assert not [index for index in added if low <= index < high]
    assert min(index for index in added if index >= low) == high
    # just below the range: the 256 byte tokens, right after the last added token
    assert max(index for index in added if index < low) == low - 256 - 1
    strings = tokenizer.token_strings(list(range(low - 256, low)))
    assert len(set(strings)) == 256 and strings[0] == "\x00" and strings[-1] == "\\xff"


@pytest.mark.xdist_group("real_model")
def test_smollm2_ordinary_ids_are_every_id_above_its_control_tokens():
    from mha_ref.tutorial.real_models import smollm2 as files
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2

    require_model_file(files, "SmolLM2")
    tokenizer = load_smollm2("cpu").tokenizer
    added = tokenizer._backend.get_added_tokens_decoder()  # its control tokens
    low, high = SMOLLM2_ORDINARY_IDS
    assert sorted(added) == list(range(low))  # ids 0 .. 16, nothing above
    assert high == tokenizer.vocab_size == 49152
    assert tokenizer.token_strings([SMOLLM2_FIRST_ID]) == ["<|endoftext|>"]
    assert tokenizer.encode("").numel() == 0  # its tokenizer puts nothing first
