"""The speed comparison behind ``nox -s bench``: ``mha_ref`` against PyTorch, side by side.

Every pair is measured in one process, in rounds: each round times both sides once, one right
after the other, and the order alternates from round to round (A B, B A, A B, ...), so a change
of machine load hits both sides alike and neither side always runs first. Each round gives one
ratio (ours / PyTorch); the report gives the median of these ratios, and their lowest and highest
value over the rounds. A ratio with a target is ``ok`` when even its highest round meets the
target, ``MISSED`` when even its lowest round misses it, and ``undecided`` when the rounds fall
on both sides: one loaded run then reads as undecided instead of flipping the verdict. Run it
with::

    python -m mha_ref.tutorial.bench_suite --json build/bench/bench.json

Comparisons (forward, and forward + backward), float32:

* ``mha_ref.MultiHeadAttention`` (default settings, ``need_weights=False``) against
  ``torch.nn.MultiheadAttention(need_weights=False)``;
* the same module with ``use_fused=False`` (the explicit path even without weights) against the
  same PyTorch module;
* the explicit teaching path ``mha_ref.scaled_dot_product_attention`` against
  ``torch.nn.functional.scaled_dot_product_attention`` restricted to its math backend, and
  against its default (fused) backend.

Sizes: batch 8, 1024 tokens, ``embed_dim`` 768, 12 heads (a BERT-base layer), and the teaching
size of the examples (batch 2, 5 tokens, ``embed_dim`` 64, 8 heads).

How attention runs fast (issue 14), at the BERT-base/GPT-2-small size only:

* ``mha_ref.tiled_attention`` (the online softmax, ``block_size`` 128) against
  ``F.scaled_dot_product_attention`` restricted to its math backend, and to its fused backends
  (forward);
* one decode step of ``mha_ref.GroupedQueryAttention`` against a cache of 4096 tokens, with
  ``num_kv_heads`` 4, 2 and 1 against ``num_kv_heads`` = ``num_heads`` = 12 (the ratio is the
  time of the grouped step over the multi-head step), on the fused and the explicit path;
* ``torch.compile(mha_ref.MultiHeadAttention)`` against
  ``torch.compile(torch.nn.MultiheadAttention)``, forward and forward + backward, when
  ``torch.compile`` can run here (on a CPU it needs a C++ compiler; otherwise the report says it
  was skipped).

Positions inside attention (issue 20): the cost of the rotation itself.
``mha_ref.GroupedQueryAttention`` (12 heads, ``embed_dim`` 768, as many key/value heads as
query heads: multi-head attention) with ``rope=mha_ref.RotaryEmbedding(64)`` against the same
layer with the same weights and no rotation, batch 8, 256 tokens, forward and forward +
backward (the ratio is the time with RoPE over the time without).

Attention as recent models use it (issue 22), one decode step, batch 8, ``embed_dim`` 768, 12
heads, float32, every side on ``mha_ref``'s explicit path unless the name says ``fused``:

* ``mha_ref.MultiHeadLatentAttention`` (``kv_latent_dim`` 256, ``rope_dim`` 32, absorbed form
  with the folded weights computed once) against a cache of 4096 tokens, over GQA with 4
  key/value heads and over MHA at the same width and context, and over its own naive form
  (which rebuilds every cached key and value at each step);
* a sliding-window decode step (a cache of 2048 tokens, what a rolling cache of that window
  holds) over the full decode step against 16384 tokens, 4 key/value heads, fused and explicit.

The real models (issue 32), on the CPU in float32 with the process's threads, each against
transformers' model of the same GGUF file
(:func:`mha_ref.tutorial.real_models.transformers_reference.transformers_from_gguf`): a forward
pass of one sequence of 256 and of 1,024 tokens of a shipped text, logits at every position,
for SmolLM2-135M-Instruct (``LlamaForCausalLM``) and Gemma 3 270M (``Gemma3ForCausalLM``); and
one decode step of each with a cache of :data:`REAL_DECODE_CACHED` tokens (``decode`` with
``KVCache`` in every SmolLM2 block; in Gemma 3, ring buffers of 512 keys in its local blocks
and ``KVCache`` in its global ones), against transformers' own cache (its sliding-window
layers in Gemma 3's local blocks); each step's cache is cut back to that length first.
Skipped, with a note, where a model's file or transformers is missing.

``--only`` picks groups: ``modules``, ``tiled``, ``decode``, ``compile``, ``rope``, ``modern``,
``real``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from mha_ref.device import pick_device
from mha_ref.functional import scaled_dot_product_attention, split_heads
from mha_ref.grouped import GroupedQueryAttention
from mha_ref.latent import MultiHeadLatentAttention
from mha_ref.multihead import MultiHeadAttention
from mha_ref.rope import RotaryEmbedding
from mha_ref.tiled import tiled_attention
from mha_ref.tutorial.bench import environment, torch_compile_status

__all__ = [
    "Comparison",
    "GROUPS",
    "SIZES",
    "TARGETS",
    "compare",
    "compare_rounds",
    "main",
    "run_suite",
    "summarize",
]

#: the groups of comparisons ``run_suite`` can run
GROUPS = ("modules", "tiled", "decode", "compile", "rope", "modern", "real")

#: the lengths of the real models' forward passes (tokens of a shipped text, one sequence)
REAL_LENGTHS = (256, 1024)
#: the tokens already in the cache at the real models' decode step
REAL_DECODE_CACHED = 1024

#: (batch, cached_len, embed_dim, num_heads) of the decode-step comparison
DECODE_SIZE = (8, 4096, 768, 12)

#: (batch, cached_len, embed_dim, num_heads, kv_latent_dim, rope_dim) of the MLA decode
#: comparison: DeepSeek-V2's proportions (latent of 4 head widths, RoPE key of half a head)
MLA_DECODE_SIZE = (8, 4096, 768, 12, 256, 32)

#: (batch, cached_len, embed_dim, num_heads, num_kv_heads, window) of the sliding-window
#: decode comparison: a long context against a window of an eighth of it
WINDOW_DECODE_SIZE = (8, 16384, 768, 12, 4, 2048)

#: (batch, seq_len, embed_dim, num_heads) of the RoPE comparison: a BERT-base layer, 256 tokens
ROPE_SIZE = (8, 256, 768, 12)

# (batch, seq_len, embed_dim, num_heads)
SIZES = {"bert-base layer": (8, 1024, 768, 12), "teaching": (2, 5, 64, 8)}

# the largest acceptable ratio (ours / reference) for each comparison, from the project's goals
TARGETS = {
    "MultiHeadAttention (default) vs nn.MultiheadAttention, forward": 1.05,
    "MultiHeadAttention (default) vs nn.MultiheadAttention, forward+backward": 1.10,
    "scaled_dot_product_attention (explicit) vs F.sdpa math backend, forward": 1.30,
    "scaled_dot_product_attention (explicit) vs F.sdpa math backend, forward+backward": 1.30,
}


@dataclass(frozen=True)
class Comparison:
    """Two timings taken in rounds, and the ratio of each round.

    Attributes:
        name: what is compared, e.g. ``"... vs ..., forward"``.
        size: the size label of :data:`SIZES`.
        ours_ms: median milliseconds of the ``mha_ref`` side.
        reference_ms: median milliseconds of the PyTorch side.
        ratio: the median over the rounds of ``ours / reference`` (below 1: ours is faster).
        ratio_min: the lowest ratio of one round.
        ratio_max: the highest ratio of one round.
        target: the largest acceptable ratio, or ``None`` when there is no goal.
        rounds: how many rounds were timed.
    """

    name: str
    size: str
    ours_ms: float
    reference_ms: float
    ratio: float
    ratio_min: float
    ratio_max: float
    target: float | None
    rounds: int

    @property
    def verdict(self) -> str | None:
        """``"ok"``, ``"missed"`` or ``"undecided"`` against the target (``None`` without one).

        ``ok``: every round met the target (``ratio_max <= target``); ``missed``: no round did
        (``ratio_min > target``); ``undecided``: the rounds fall on both sides of it.
        """
        if self.target is None:
            return None
        if self.ratio_max <= self.target:
            return "ok"
        if self.ratio_min > self.target:
            return "missed"
        return "undecided"


def compare_rounds(
    ours: Callable[[], object],
    reference: Callable[[], object],
    *,
    warmup: int,
    repeats: int,
    device: torch.device | str = "cpu",
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[list[float], list[float]]:
    """Seconds of ``ours`` and of ``reference`` in each of ``repeats`` rounds.

    A round times both callables once, back to back; even rounds run ``ours`` first, odd rounds
    ``reference`` first, so that neither side always meets the machine first (a cache warmed
    by the other side, a frequency change). ``warmup`` untimed rounds come before.

    Args:
        ours, reference: callables with no arguments.
        warmup: untimed rounds.
        repeats: timed rounds, at least 1.
        device: where they run; on CUDA the device is synchronised around each call.
        clock: a function returning seconds; tests pass a fake one.

    Returns:
        ``(ours_seconds, reference_seconds)``, one entry per round, in round order.
    """
    if warmup < 0 or repeats < 1:
        raise ValueError(f"warmup must be >= 0 and repeats >= 1, got {warmup} and {repeats}")
    for _ in range(warmup):
        ours()
        reference()
    times: dict[str, list[float]] = {"ours": [], "reference": []}
    for round_index in range(repeats):
        order = (("ours", ours), ("reference", reference))
        for label, fn in order if round_index % 2 == 0 else order[::-1]:
            _synchronize(torch.device(device))
            start = clock()
            fn()
            _synchronize(torch.device(device))
            times[label].append(clock() - start)
    return times["ours"], times["reference"]


def compare(
    ours: Callable[[], object],
    reference: Callable[[], object],
    *,
    warmup: int,
    repeats: int,
    device: torch.device | str = "cpu",
) -> tuple[float, float]:
    """Median seconds of ``ours`` and ``reference``, timed in rounds (:func:`compare_rounds`)."""
    ours_s, reference_s = compare_rounds(
        ours, reference, warmup=warmup, repeats=repeats, device=device
    )
    return statistics.median(ours_s), statistics.median(reference_s)


def summarize(
    name: str,
    size: str,
    ours_seconds: Sequence[float],
    reference_seconds: Sequence[float],
    target: float | None,
) -> Comparison:
    """The :class:`Comparison` of one pair's rounds: medians, and the ratio of each round.

    Raises:
        ValueError: If the two lists differ in length or are empty.
    """
    if len(ours_seconds) != len(reference_seconds) or not ours_seconds:
        raise ValueError(
            f"one time per round on each side, got {len(ours_seconds)} and "
            f"{len(reference_seconds)}"
        )
    ratios = [o / r for o, r in zip(ours_seconds, reference_seconds, strict=True)]
    return Comparison(
        name=name,
        size=size,
        ours_ms=statistics.median(ours_seconds) * 1e3,
        reference_ms=statistics.median(reference_seconds) * 1e3,
        ratio=statistics.median(ratios),
        ratio_min=min(ratios),
        ratio_max=max(ratios),
        target=target,
        rounds=len(ratios),
    )


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _forward_backward(forward: Callable[[], torch.Tensor], inputs: list[torch.Tensor], module):
    """A callable running ``forward`` then a backward pass of its sum."""

    def step() -> None:
        for tensor in inputs:
            tensor.grad = None
        if module is not None:
            module.zero_grad(set_to_none=True)
        forward().sum().backward()

    return step


def _module_pair(size: tuple[int, int, int, int], device: torch.device, options: dict):
    batch, seq_len, embed_dim, num_heads = size
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True, device=device)
    ours = MultiHeadAttention(embed_dim, num_heads, batch_first=True, device=device, **options)
    ours.load_state_dict(reference.state_dict())
    x = torch.randn(batch, seq_len, embed_dim, device=device, requires_grad=True)
    return ours, reference, x


def run_suite(
    *,
    device: torch.device | None = None,
    repeats: int = 7,
    warmup: int = 2,
    groups: tuple[str, ...] = GROUPS,
    notes: list[str] | None = None,
) -> list[Comparison]:
    """Measure every comparison of the chosen ``groups``; return them in order.

    ``notes`` (a list) receives one line per group that was skipped, with the reason.
    """
    device = device or pick_device()
    notes = notes if notes is not None else []
    results: list[Comparison] = []

    def record(name: str, size: str, ours, reference) -> None:
        ours_s, reference_s = compare_rounds(
            ours, reference, warmup=warmup, repeats=repeats, device=device
        )
        target = TARGETS.get(name) if size != "teaching" else None
        results.append(summarize(name, size, ours_s, reference_s, target))

    def record_both(name, size, ours_fwd, reference_fwd, inputs, modules) -> None:
        """Record the forward pass (no autograd), then forward + backward."""
        with torch.no_grad():
            record(f"{name}, forward", size, ours_fwd, reference_fwd)
        record(
            f"{name}, forward+backward",
            size,
            _forward_backward(ours_fwd, inputs, modules[0]),
            _forward_backward(reference_fwd, inputs, modules[1]),
        )

    if "modules" in groups:
        _module_comparisons(device, record_both)
    if "tiled" in groups:
        _tiled_comparisons(device, record)
    if "decode" in groups:
        _decode_comparisons(device, record)
    if "rope" in groups:
        _rope_comparisons(device, record_both)
    if "modern" in groups:
        _modern_comparisons(device, record)
    if "real" in groups:
        _real_model_comparisons(record, notes)
    if "compile" in groups:
        available, reason = torch_compile_status(device)
        if available:
            _compile_comparisons(device, record_both)
        else:
            notes.append(f"torch.compile comparisons skipped: {reason}")
    return results


def _module_comparisons(device: torch.device, record_both) -> None:
    """The modules and the explicit functional against PyTorch, at every size."""
    for size_name, size in SIZES.items():
        for label, options in (("default", {}), ("use_fused=False", {"use_fused": False})):
            ours, reference, x = _module_pair(size, device, options)

            def ours_fwd(ours=ours, x=x):
                return ours(x, x, x, need_weights=False)[0]

            def reference_fwd(reference=reference, x=x):
                return reference(x, x, x, need_weights=False)[0]

            name = f"MultiHeadAttention ({label}) vs nn.MultiheadAttention"
            record_both(name, size_name, ours_fwd, reference_fwd, [x], (ours, reference))

        q, k, v = _heads(size, device, requires_grad=True)

        def explicit(q=q, k=k, v=v):
            return scaled_dot_product_attention(q, k, v)

        def math_backend(q=q, k=k, v=v):
            with sdpa_kernel(SDPBackend.MATH):
                return F.scaled_dot_product_attention(q, k, v)

        def default_backend(q=q, k=k, v=v):
            return F.scaled_dot_product_attention(q, k, v)

        for reference_name, reference_fn in (
            ("F.sdpa math backend", math_backend),
            ("F.sdpa default backend", default_backend),
        ):
            name = f"scaled_dot_product_attention (explicit) vs {reference_name}"
            record_both(name, size_name, explicit, reference_fn, [q, k, v], (None, None))


def _heads(size: tuple[int, int, int, int], device: torch.device, requires_grad: bool):
    """Random queries, keys, values ``(batch, num_heads, seq_len, head_dim)``, contiguous."""
    batch, seq_len, embed_dim, num_heads = size
    torch.manual_seed(0)
    return tuple(
        split_heads(torch.randn(batch, seq_len, embed_dim, device=device), num_heads)
        .contiguous()
        .requires_grad_(requires_grad)
        for _ in range(3)
    )  # each (batch, num_heads, seq_len, head_dim)


def _tiled_comparisons(device: torch.device, record) -> None:
    """``tiled_attention`` against SDPA's math and fused backends, forward, BERT-base size."""
    size_name = "bert-base layer"
    q, k, v = _heads(SIZES[size_name], device, requires_grad=False)

    def tiled(q=q, k=k, v=v):
        return tiled_attention(q, k, v, block_size=128)

    def math_backend(q=q, k=k, v=v):
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v)

    def fused_backend(q=q, k=k, v=v):
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v)

    with torch.no_grad():
        record("tiled_attention (block 128) vs F.sdpa math backend, forward", size_name, tiled,
               math_backend)
        record("tiled_attention (block 128) vs F.sdpa fused backend, forward", size_name, tiled,
               fused_backend)


def _decode_step(num_kv_heads: int, use_fused: bool, device: torch.device):
    """A callable running one decode step against a full cache (cropped back every call)."""
    batch, cached_len, embed_dim, num_heads = DECODE_SIZE
    head_dim = embed_dim // num_heads
    torch.manual_seed(0)
    layer = GroupedQueryAttention(embed_dim, num_heads, num_kv_heads, use_fused=use_fused)
    layer = layer.to(device).eval()
    cache = layer.new_cache(batch, cached_len + 1)
    shape = (batch, num_kv_heads, cached_len, head_dim)
    cache.append(torch.randn(shape, device=device), torch.randn(shape, device=device))
    x = torch.randn(batch, 1, embed_dim, device=device)  # (batch, 1, embed_dim)

    def step() -> torch.Tensor:
        cache.crop(cached_len)
        return layer.decode(x, cache)  # (batch, 1, embed_dim)

    return step


def _decode_comparisons(device: torch.device, record) -> None:
    """One decode step with fewer key/value heads against the multi-head step."""
    batch, cached_len, embed_dim, num_heads = DECODE_SIZE
    size_name = f"decode b{batch} cache{cached_len}"
    for path, use_fused in (("fused", True), ("explicit", False)):
        reference = _decode_step(num_heads, use_fused, device)
        for num_kv_heads in (4, 2, 1):
            ours = _decode_step(num_kv_heads, use_fused, device)
            with torch.no_grad():
                record(
                    f"decode step ({path}), num_kv_heads={num_kv_heads} vs {num_heads}",
                    size_name, ours, reference,
                )


def _mla_decode_step(device: torch.device, absorbed: bool):
    """One MLA decode step against a full latent cache (absorbed weights folded once)."""
    batch, cached_len, embed_dim, num_heads, latent_dim, rope_dim = MLA_DECODE_SIZE
    torch.manual_seed(0)
    layer = MultiHeadLatentAttention(
        embed_dim, num_heads, latent_dim, embed_dim // num_heads, rope_dim,
        max_len=cached_len + 1,
    ).to(device).eval()
    cache = layer.new_cache(batch, cached_len + 1)
    cache.append(
        torch.randn(batch, cached_len, latent_dim, device=device),
        torch.randn(batch, cached_len, rope_dim, device=device),
    )
    with torch.no_grad():
        folded = layer.absorbed_weights() if absorbed else None
    x = torch.randn(batch, 1, embed_dim, device=device)  # (batch, 1, embed_dim)

    def step() -> torch.Tensor:
        cache.crop(cached_len)
        return layer.decode(x, cache, absorbed=absorbed, absorbed_weights=folded)

    return step


def _gqa_decode_step(
    size: tuple[int, int, int, int], num_kv_heads: int, device: torch.device,
    use_fused: bool = False,
):
    """One GQA decode step of ``size = (batch, cached_len, embed_dim, num_heads)``."""
    batch, cached_len, embed_dim, num_heads = size
    torch.manual_seed(0)
    layer = GroupedQueryAttention(
        embed_dim, num_heads, num_kv_heads, bias=False, use_fused=use_fused
    ).to(device).eval()
    cache = layer.new_cache(batch, cached_len + 1)
    shape = (batch, num_kv_heads, cached_len, embed_dim // num_heads)
    cache.append(torch.randn(shape, device=device), torch.randn(shape, device=device))
    x = torch.randn(batch, 1, embed_dim, device=device)  # (batch, 1, embed_dim)

    def step() -> torch.Tensor:
        cache.crop(cached_len)
        return layer.decode(x, cache)  # (batch, 1, embed_dim)

    return step


def _modern_comparisons(device: torch.device, record) -> None:
    """MLA's absorbed decode against GQA and MHA at equal width and context (all on the
    explicit path), and a sliding-window decode (a cache of ``window`` tokens, what a rolling
    cache holds) against the full decode at a long context."""
    batch, cached_len, embed_dim, num_heads, latent_dim, rope_dim = MLA_DECODE_SIZE
    size = (batch, cached_len, embed_dim, num_heads)
    size_name = f"decode b{batch} cache{cached_len}"
    with torch.no_grad():
        absorbed = _mla_decode_step(device, absorbed=True)
        gqa_heads = max(1, num_heads // 3)  # 4 of 12: GQA's group of 3
        for label, kv_heads in ((f"GQA num_kv_heads={gqa_heads}", gqa_heads), ("MHA", num_heads)):
            record(
                f"MLA decode step (absorbed, d_c={latent_dim}) vs {label} (explicit)",
                size_name, absorbed, _gqa_decode_step(size, kv_heads, device),
            )
        record(
            f"MLA decode step (absorbed) vs MLA naive (d_c={latent_dim})",
            size_name, absorbed, _mla_decode_step(device, absorbed=False),
        )
        batch, long_len, embed_dim, num_heads, kv_heads, window = WINDOW_DECODE_SIZE
        for path, fused in (("fused", True), ("explicit", False)):
            windowed = _gqa_decode_step((batch, window, embed_dim, num_heads), kv_heads, device,
                                        use_fused=fused)
            full = _gqa_decode_step((batch, long_len, embed_dim, num_heads), kv_heads, device,
                                    use_fused=fused)
            record(
                f"sliding-window decode step (window {window}, {path}) vs full ({long_len})",
                f"decode b{batch} cache{long_len}", windowed, full,
            )


def _rope_comparisons(device: torch.device, record_both) -> None:
    """Attention with RoPE against the same layer without it (same weights), both paths."""
    batch, seq_len, embed_dim, num_heads = ROPE_SIZE
    size_name = f"rope b{batch} L{seq_len}"
    for path, use_fused in (("fused", True), ("explicit", False)):
        torch.manual_seed(0)
        plain = GroupedQueryAttention(embed_dim, num_heads, num_heads, use_fused=use_fused)
        rope = RotaryEmbedding(embed_dim // num_heads, max_len=seq_len, device=device)
        rotary = GroupedQueryAttention(
            embed_dim, num_heads, num_heads, use_fused=use_fused, rope=rope
        )
        rotary.load_state_dict(plain.state_dict())
        plain, rotary = plain.to(device), rotary.to(device)
        x = torch.randn(batch, seq_len, embed_dim, device=device, requires_grad=True)

        def with_rope(layer=rotary, x=x):
            return layer(x, is_causal=True)[0]

        def without_rope(layer=plain, x=x):
            return layer(x, is_causal=True)[0]

        name = f"GroupedQueryAttention ({path}) with RoPE vs without"
        record_both(name, size_name, with_rope, without_rope, [x], (rotary, plain))


def _real_models() -> list[tuple[str, str, Callable[[], object], Callable[[], Path]]]:
    """(name, transformers' class, the project's loader, the file's path) of each real model."""
    from mha_ref.tutorial.real_models import gemma3, smollm2
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2

    return [
        ("SmolLM2-135M-Instruct", "LlamaForCausalLM", lambda: load_smollm2("cpu"),
         smollm2.model_file),
        ("Gemma 3 270M", "Gemma3ForCausalLM", lambda: gemma3.load_gemma3("cpu"),
         gemma3.model_file),
    ]  # fmt: skip


def _real_model_comparisons(record, notes: list[str]) -> None:
    """Each real model's forward pass against transformers' model of the same file."""
    from mha_ref.tutorial.real_models.packages import ModelFileError
    from mha_ref.tutorial.real_models.texts import real_text
    from mha_ref.tutorial.real_models.transformers_reference import transformers_from_gguf

    for name, their_class, load, model_file in _real_models():
        try:
            ours = load()
            theirs, _ = transformers_from_gguf(model_file())
        except (ModelFileError, ModuleNotFoundError) as missing:
            notes.append(f"{name} against transformers skipped: {missing}")
            continue
        text = ours.tokenizer.encode(real_text("execution_model"))  # (text_len,)
        for length in REAL_LENGTHS:
            tokens = text[None, :length]  # (1, seq_len)

            def ours_fwd(tokens=tokens, model=ours):
                return model(tokens)[0]  # (1, seq_len, vocab_size)

            def their_fwd(tokens=tokens, model=theirs):
                return model(input_ids=tokens, use_cache=False).logits  # (1, seq_len, vocab)

            with torch.no_grad():
                record(f"{name} vs transformers {their_class}, forward",
                       f"{length} tokens", ours_fwd, their_fwd)  # fmt: skip
        with torch.no_grad():
            ours_step, their_step = _decode_steps(ours, theirs, text, REAL_DECODE_CACHED)
            record(f"{name} vs transformers {their_class}, decode step",
                   f"{REAL_DECODE_CACHED} cached", ours_step, their_step)  # fmt: skip


def _decode_steps(ours, theirs, text: torch.Tensor, cached: int):
    """One decode step of each model after ``cached`` tokens of ``text`` (``(text_len,)``);
    each step first cuts its cache back to ``cached`` tokens, so every step is the same.

    A full cache (``KVCache``, transformers' ``DynamicLayer``) is cut by its length; a ring
    buffer (``RollingKVCache``, Gemma 3's local blocks) by its count of tokens seen: the step
    then writes the same token into the same slot again. transformers' sliding-window layers
    keep their past while recording (``activate_past_recording``), so that ``crop`` can cut
    them back too.
    """
    from transformers import DynamicCache

    from mha_ref import RollingKVCache

    prompt = text[None, :cached]  # (1, cached)
    new_token = text[None, cached : cached + 1]  # (1, 1)
    caches = ours.new_caches(1, cached + 1)
    ours.decode(prompt, caches, logits_at=torch.tensor([-1]))  # fills the caches
    past = DynamicCache(config=theirs.config)
    for layer in past.layers:
        if getattr(layer, "is_sliding", False):
            layer.activate_past_recording()
    theirs(input_ids=prompt, cache=past, use_cache=True)  # fills its cache

    def ours_step():
        for cache in caches:
            if isinstance(cache, RollingKVCache):
                cache.seen = cached
            else:
                cache.cached_len = cached
        return ours.decode(new_token, caches)  # (1, 1, vocab_size)

    def their_step():
        past.crop(cached - past.get_seq_length())  # a negative count removes that many
        return theirs(input_ids=new_token, cache=past, use_cache=True).logits

    return ours_step, their_step


def _compile_comparisons(device: torch.device, record_both) -> None:
    """``torch.compile`` of both modules, forward and forward + backward, BERT-base size."""
    size_name = "bert-base layer"
    ours, reference, x = _module_pair(SIZES[size_name], device, {})
    ours_compiled, reference_compiled = torch.compile(ours), torch.compile(reference)

    def ours_fwd():
        return ours_compiled(x, x, x, need_weights=False)[0]

    def reference_fwd():
        return reference_compiled(x, x, x, need_weights=False)[0]

    name = "torch.compile(MultiHeadAttention) vs torch.compile(nn.MultiheadAttention)"
    record_both(name, size_name, ours_fwd, reference_fwd, [x], (ours, reference))


def format_report(results: list[Comparison], env: dict, notes: list[str] = ()) -> str:
    """A plain-text table of the comparisons with the environment they ran in."""
    lines = [
        "environment: " + ", ".join(f"{k}={v}" for k, v in env.items()),
        *notes,
        "ratio: median over the rounds of ours / the reference (PyTorch; transformers for the real "
        "models); rounds: its lowest and highest value",
        f"{'size':<16} {'ours ms':>10} {'ref ms':>10} {'ratio':>7} {'rounds':>13} "
        f"{'target':>7}  comparison",
    ]
    verdicts = {None: "", "ok": "  ok", "missed": "  MISSED", "undecided": "  undecided"}
    for r in results:
        target = f"{r.target:.2f}" if r.target is not None else "-"
        spread = f"{r.ratio_min:.3f}-{r.ratio_max:.3f}"
        lines.append(
            f"{r.size:<16} {r.ours_ms:10.3f} {r.reference_ms:10.3f} {r.ratio:7.3f} {spread:>13} "
            f"{target:>7}  {r.name}{verdicts[r.verdict]}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: run the suite, print the table, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--only", nargs="+", choices=GROUPS, default=list(GROUPS), help="groups to run"
    )
    args = parser.parse_args(argv)
    device = pick_device()
    env = environment(device)
    notes: list[str] = []
    results = run_suite(
        device=device, repeats=args.repeats, warmup=args.warmup, groups=tuple(args.only),
        notes=notes,
    )
    print(format_report(results, env, notes))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "environment": env,
            "notes": notes,
            "results": [{**asdict(r), "verdict": r.verdict} for r in results],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
