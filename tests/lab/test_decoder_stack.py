"""The stages the real models share (``mha_ref.tutorial.real_models.layers.DecoderStack``) and
the renaming of a GGUF file's tensors (``gguf.rename_tensors``), on tiny stand-ins: no weights.

Both real models run them (tests/lab/test_real_model.py and test_gemma3.py check their outputs
against transformers'); here, each check of input and each stage on numbers worked out by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch import nn

from mha_ref.tutorial.real_models.gemma3 import Gemma3, Gemma3Config
from mha_ref.tutorial.real_models.gguf import rename_tensors
from mha_ref.tutorial.real_models.layers import DecoderConfig, DecoderStack, RMSNorm
from mha_ref.tutorial.real_models.smollm2 import SmolLM2, SmolLM2Config


@dataclass(frozen=True)
class _Sizes:
    num_layers: int = 3
    num_heads: int = 2
    vocab_size: int = 5
    context_length: int = 4


class _AddBlock(nn.Module):
    """Adds its number to the stream; its "weights" are its number in a (1, 2, L, L) tensor."""

    def __init__(self, number: float):
        super().__init__()
        self.number = number

    def forward(self, residual, need_weights):
        seq_len = residual.shape[1]
        weights = torch.full((1, 2, seq_len, seq_len), self.number) if need_weights else None
        return residual + self.number, weights


class _Tiny(DecoderStack):
    def __init__(self):
        super().__init__()
        self.config = _Sizes()
        self.embedding = nn.Embedding(5, 2)
        self.layers = nn.ModuleList(_AddBlock(n) for n in (1.0, 10.0, 100.0))
        self.final_norm = RMSNorm(2, 1e-6)


def test_both_real_models_run_the_shared_stages():
    for model in (SmolLM2, Gemma3):
        for stage in ("run_layers", "unembed", "check_tokens", "check_head", "decode",
                      "check_cache_length"):
            assert getattr(model, stage) is getattr(DecoderStack, stage), (model, stage)


def test_run_layers_runs_the_range_asked_and_returns_its_weights():
    model = _Tiny()
    stream = torch.zeros(1, 3, 2)  # (batch, seq_len, embed_dim)
    out, weights = model.run_layers(stream, 1, 3, need_weights=True)
    assert torch.equal(out, torch.full((1, 3, 2), 110.0))  # blocks 1 and 2: 10 + 100
    assert [float(w[0, 0, 0, 0]) for w in weights] == [10.0, 100.0]
    out, weights = model.run_layers(stream)
    assert torch.equal(out, torch.full((1, 3, 2), 111.0)) and weights == []
    out, _ = model.run_layers(stream, 2, 2)  # an empty range is the stream itself
    assert torch.equal(out, stream)


@pytest.mark.parametrize(("start", "stop"), [(-1, 2), (2, 1), (0, 4), (0.0, 2), (0, 2.0)])
def test_run_layers_refuses_a_range_outside_the_blocks(start, stop):
    with pytest.raises(ValueError, match=r"need 0 <= start <= stop <= num_layers=3"):
        _Tiny().run_layers(torch.zeros(1, 2, 2), start, stop)


def test_unembed_is_the_normed_stream_times_the_tied_embedding():
    model = _Tiny()
    with torch.no_grad():
        model.embedding.weight.copy_(torch.tensor([[1.0, 0], [0, 1], [1, 1], [-1, 0], [0, 0]]))
    stream = torch.tensor([[[3.0, 4.0]]])  # RMS 3.5355: normed to (0.8485, 1.1314)
    logits = model.unembed(stream)  # (1, 1, vocab_size)
    normed = stream / (12.5 + 1e-6) ** 0.5
    expected = torch.stack([normed[..., 0], normed[..., 1], normed.sum(-1), -normed[..., 0],
                            torch.zeros(1, 1)], dim=-1)  # fmt: skip
    torch.testing.assert_close(logits, expected)


def test_check_tokens_and_check_head_name_what_is_wrong():
    model = _Tiny()
    assert model.check_tokens(torch.tensor([1, 2])).shape == (1, 2)
    with pytest.raises(ValueError, match=r"ids in 0 \.\. 4, got 5"):
        model.check_tokens(torch.tensor([1, 5]))
    assert model.check_head(2, 1) == (2, 1)
    with pytest.raises(ValueError, match=r"no head \(3, 0\): layers are 0 \.\. 2"):
        model.check_head(3, 0)
    with pytest.raises(TypeError, match="head must be an int, got bool"):
        model.check_head(0, True)


def test_rename_tensors_maps_the_shared_and_the_block_names():
    block_names = {"attn_q.weight": "attention.q_proj.weight"}
    tensors = {
        "token_embd.weight": torch.zeros(1),
        "output_norm.weight": torch.ones(1),
        "blk.0.attn_q.weight": torch.full((1,), 2.0),
        "blk.1.attn_q.weight": torch.full((1,), 3.0),
    }
    state = rename_tensors(tensors, 2, block_names, "Tiny")
    assert {name: float(t) for name, t in state.items()} == {
        "embedding.weight": 0.0,
        "final_norm.weight": 1.0,
        "layers.0.attention.q_proj.weight": 2.0,
        "layers.1.attention.q_proj.weight": 3.0,
    }
    with pytest.raises(ValueError, match=r"3-block Tiny: missing \['blk.2.attn_q.weight'\]"):
        rename_tensors(tensors, 3, block_names, "Tiny")
    extra = {**tensors, "output.weight": torch.zeros(1)}
    with pytest.raises(ValueError, match=r"unexpected \['output.weight'\]"):
        rename_tensors(extra, 2, block_names, "Tiny")


def _metadata(architecture: str, **extra) -> dict:
    """GGUF metadata with the eight shared sizes under ``architecture``'s keys (made-up values)."""
    sizes = {
        "embedding_length": 8, "block_count": 3, "attention.head_count": 4,
        "attention.head_count_kv": 2, "feed_forward_length": 16, "rope.freq_base": 500.0,
        "attention.layer_norm_rms_epsilon": 1e-5, "context_length": 64,
    }  # fmt: skip
    return {"general.architecture": architecture,
            **{f"{architecture}.{key}": value for key, value in sizes.items()}, **extra}


def test_both_configs_read_the_shared_sizes_from_the_same_keys():
    smollm2 = SmolLM2Config.from_metadata(_metadata("llama", **{"llama.vocab_size": 11}))
    gemma3 = Gemma3Config.from_metadata(_metadata("gemma3", **{
        "gemma3.attention.key_length": 5, "gemma3.attention.value_length": 5,
        "gemma3.attention.sliding_window": 7, "tokenizer.ggml.tokens": ["a", "b", "c"],
    }))  # fmt: skip
    for config in (smollm2, gemma3):
        assert isinstance(config, DecoderConfig)
        assert (config.embed_dim, config.num_layers, config.num_heads, config.num_kv_heads,
                config.ffn_dim, config.rope_base, config.rms_eps, config.context_length) == (
                8, 3, 4, 2, 16, 500.0, 1e-5, 64)  # fmt: skip
    # what the files state differently: SmolLM2's head_dim is embed_dim // num_heads and its
    # vocabulary a key; Gemma 3's head_dim is the key width and its vocabulary the token list
    assert (smollm2.head_dim, smollm2.vocab_size) == (2, 11)
    assert (gemma3.head_dim, gemma3.vocab_size, gemma3.sliding_window) == (5, 3, 7)
    assert gemma3.global_layers == (), "3 blocks: none is the sixth"


def test_a_config_names_a_missing_key_and_a_wrong_architecture():
    metadata = _metadata("llama", **{"llama.vocab_size": 11})
    del metadata["llama.block_count"]
    with pytest.raises(ValueError, match="no 'llama.block_count' .*num_layers.*SmolLM2 file"):
        SmolLM2Config.from_metadata(metadata)
    with pytest.raises(ValueError, match="architecture is 'llama'; Gemma 3 and this code are "
                                         "'gemma3'"):
        Gemma3Config.from_metadata(_metadata("llama"))


def test_the_cache_length_is_checked_against_the_context():
    model = _Tiny()  # context_length 4
    assert model.check_cache_length(None) == 4
    assert model.check_cache_length(3) == 3
    with pytest.raises(ValueError, match="max_len=5 is above the model's context_length=4"):
        model.check_cache_length(5)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="max_len must be a positive int or None"):
            model.check_cache_length(bad)
