"""The speed comparison behind ``nox -s bench``: ``mha_ref`` against PyTorch, side by side.

Every pair is measured in one process, interleaved call by call (A, B, A, B, ...), so a change of
machine load hits both sides alike; the report gives the ratio of the medians. Run it with::

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
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from mha_ref.device import pick_device
from mha_ref.functional import scaled_dot_product_attention, split_heads
from mha_ref.multihead import MultiHeadAttention
from mha_ref.tutorial.bench import environment

__all__ = ["Comparison", "SIZES", "TARGETS", "compare", "main", "run_suite"]

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
    """The medians of two interleaved timings and their ratio.

    Attributes:
        name: what is compared, e.g. ``"... vs ..., forward"``.
        size: the size label of :data:`SIZES`.
        ours_ms: median milliseconds of the ``mha_ref`` side.
        reference_ms: median milliseconds of the PyTorch side.
        ratio: ``ours_ms / reference_ms`` (below 1: ours is faster).
        target: the largest acceptable ratio, or ``None`` when there is no goal.
    """

    name: str
    size: str
    ours_ms: float
    reference_ms: float
    ratio: float
    target: float | None

    @property
    def met(self) -> bool | None:
        """Whether the ratio is within the target (``None`` without a target)."""
        return None if self.target is None else self.ratio <= self.target


def compare(
    ours: Callable[[], object],
    reference: Callable[[], object],
    *,
    warmup: int,
    repeats: int,
    device: torch.device,
) -> tuple[float, float]:
    """Median seconds of ``ours`` and ``reference``, timed alternately call by call."""
    for _ in range(warmup):
        ours()
        reference()
    times: dict[str, list[float]] = {"ours": [], "reference": []}
    for _ in range(repeats):
        for label, fn in (("ours", ours), ("reference", reference)):
            _synchronize(device)
            start = time.perf_counter()
            fn()
            _synchronize(device)
            times[label].append(time.perf_counter() - start)
    return statistics.median(times["ours"]), statistics.median(times["reference"])


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
    *, device: torch.device | None = None, repeats: int = 7, warmup: int = 2
) -> list[Comparison]:
    """Measure every comparison at every size; return them in order."""
    device = device or pick_device()
    results: list[Comparison] = []

    def record(name: str, size: str, ours, reference) -> None:
        ours_s, reference_s = compare(
            ours, reference, warmup=warmup, repeats=repeats, device=device
        )
        results.append(
            Comparison(
                name=name,
                size=size,
                ours_ms=ours_s * 1e3,
                reference_ms=reference_s * 1e3,
                ratio=ours_s / reference_s,
                target=TARGETS.get(name) if size != "teaching" else None,
            )
        )

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

    for size_name, size in SIZES.items():
        for label, options in (("default", {}), ("use_fused=False", {"use_fused": False})):
            ours, reference, x = _module_pair(size, device, options)

            def ours_fwd(ours=ours, x=x):
                return ours(x, x, x, need_weights=False)[0]

            def reference_fwd(reference=reference, x=x):
                return reference(x, x, x, need_weights=False)[0]

            name = f"MultiHeadAttention ({label}) vs nn.MultiheadAttention"
            record_both(name, size_name, ours_fwd, reference_fwd, [x], (ours, reference))

        batch, seq_len, embed_dim, num_heads = size
        torch.manual_seed(0)
        q, k, v = (
            split_heads(torch.randn(batch, seq_len, embed_dim, device=device), num_heads)
            .contiguous()
            .requires_grad_(True)
            for _ in range(3)
        )  # (batch, num_heads, seq_len, head_dim)

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
    return results


def format_report(results: list[Comparison], env: dict) -> str:
    """A plain-text table of the comparisons with the environment they ran in."""
    lines = [
        "environment: " + ", ".join(f"{k}={v}" for k, v in env.items()),
        f"{'size':<16} {'ours ms':>10} {'torch ms':>10} {'ratio':>7} {'target':>7}  comparison",
    ]
    for r in results:
        target = f"{r.target:.2f}" if r.target is not None else "-"
        verdict = "" if r.met is None else ("  ok" if r.met else "  MISSED")
        lines.append(
            f"{r.size:<16} {r.ours_ms:10.3f} {r.reference_ms:10.3f} {r.ratio:7.3f} {target:>7}"
            f"  {r.name}{verdict}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: run the suite, print the table, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)
    device = pick_device()
    env = environment(device)
    results = run_suite(device=device, repeats=args.repeats, warmup=args.warmup)
    print(format_report(results, env))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "environment": env,
            "results": [{**asdict(r), "met": r.met} for r in results],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
