"""Lab code of example 24: attending to nothing, QK-norm, and FlexAttention's block masks.

Two controlled studies, each a few seconds of CPU per run and cached on disk:

* :func:`no_op_runs`: a one-head, one-layer model on a task where the head is needed only at
  *trigger* tokens (copy the previous token) and has nothing to do elsewhere (the target is a
  fixed token, readable from the residual stream). The head's softmax is plain, has a learned
  sink logit (gpt-oss) or a ``1`` in its denominator (softmax plus one, which equals
  ``add_zero_attn``); everything else is the same. After training, the weight the head puts on
  real keys is measured at both kinds of positions, and an ablation (the head's output set to
  zero at the non-trigger positions) tests whether those positions need it.
* :func:`qk_norm_runs`: example 6's one-head model and training code
  (:func:`mha_ref.tutorial.training.train`), with the attention computed explicitly from the
  same parameters, with or without :class:`mha_ref.QKNorm` on the queries and keys.

And one check of FlexAttention's block masks: :func:`flex_padding_check` runs a padding mask,
whose ``mask_mod`` depends on the batch index, with a block mask built for batch 0 only and one
built for every batch, eagerly and compiled, against the explicit mask; :func:`dense_blocks`
gives the blocks a correct block mask must compute.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from mha_ref._validation import require_positive_int
from mha_ref.functional import scaled_dot_product_attention
from mha_ref.masks import causal_mask, padding_mask
from mha_ref.qk_norm import QKNorm
from mha_ref.sinks import attention_with_sink
from mha_ref.tutorial import training
from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.tasks import TinyAttentionModel

__all__ = [
    "FLEX_BLOCK_SIZE",
    "NO_OP_VARIANTS",
    "QKNormTinyModel",
    "dense_blocks",
    "flex_padding_check",
    "no_op_runs",
    "qk_norm_runs",
]

#: the three softmaxes compared
NO_OP_VARIANTS = ("softmax", "sink logit", "softmax + 1")


# ------------------------------------------------------------------------------------------------
# the no-op task
# ------------------------------------------------------------------------------------------------


def no_op_batch(
    batch: int, seq_len: int, vocab_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens, targets and the trigger flags of the no-op task.

    Tokens below ``vocab_size // 2`` are triggers: the target there is the previous token. At
    any other token the target is the fixed token ``vocab_size - 1``. Position 0 has no target.

    Shape: three ``(batch, seq_len)`` tensors (long, long with ``-100`` = ignored, bool).
    """
    tokens = torch.randint(vocab_size, (batch, seq_len), generator=generator)  # (B, L)
    trigger = tokens < vocab_size // 2  # (B, L)
    previous = torch.roll(tokens, 1, dims=1)  # (B, L), previous[:, 0] is meaningless
    targets = torch.where(trigger, previous, vocab_size - 1)  # (B, L)
    targets[:, 0] = -100
    return tokens, targets, trigger


class NoOpModel(nn.Module):
    """Token and position embeddings, one causal one-head attention layer with a residual, a
    linear read-out. ``variant`` picks the softmax (see :data:`NO_OP_VARIANTS`).

    Shape: tokens ``(N, L)`` -> logits ``(N, L, V)``, weights ``(N, 1, L, L)``, context
    ``(N, L, E)``.
    """

    def __init__(self, vocab_size: int, seq_len: int, embed_dim: int, variant: str) -> None:
        super().__init__()
        self.variant = variant
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(seq_len, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.sink_logit = nn.Parameter(torch.zeros(1), requires_grad=variant == "sink logit")
        self.readout = nn.Linear(embed_dim, vocab_size)

    def forward(
        self, tokens: torch.Tensor, zero_context: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        seq_len = tokens.shape[1]
        x = self.token_embedding(tokens) + self.position_embedding.weight[:seq_len]  # (N, L, E)
        q, k, v = (p(x)[:, None] for p in (self.q_proj, self.k_proj, self.v_proj))  # (N, 1, L, E)
        mask = causal_mask(seq_len, device=tokens.device)  # (L, L)
        if self.variant == "softmax":
            context, weights = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
        else:  # "sink logit" learns the logit; "softmax + 1" keeps it at 0
            context, weights = attention_with_sink(q, k, v, self.sink_logit, mask,
                                                   return_weights=True)
        context = self.out_proj(context[:, 0])  # (N, L, E)
        if zero_context is not None:  # the ablation: no head output at these positions
            context = context.masked_fill(zero_context[..., None], 0.0)  # (N, L, E)
        return self.readout(x + context), weights, context  # (N, L, V), (N, 1, L, L), (N, L, E)


def no_op_runs(
    variant: str, seed: int, *, steps: int = 400, vocab_size: int = 16, seq_len: int = 8,
    embed_dim: int = 16, lr: float = 1e-2,
) -> dict:
    """Train the no-op model (``NoOpModel``) once and measure what its head does (cached).

    Args:
        variant: the head's softmax, one of :data:`NO_OP_VARIANTS`.
        seed: the seed of the initialisation and of the training batches.
        steps, vocab_size, seq_len, embed_dim, lr: Keyword-only; Adam steps (batch 64), token
            ids, tokens per sequence, model width, learning rate.

    Returns:
        dict: ``accuracy_trigger`` and ``accuracy_other``, the accuracy (float) at trigger and
        non-trigger positions; ``mass_trigger`` and
        ``mass_other``, the mean weight on real keys there; ``out_norm_trigger`` and
        ``out_norm_other``, the mean norm of the head's output; ``ablated_other``, the
        non-trigger accuracy with the head's output zeroed at non-trigger positions;
        ``sink_logit``, the final sink logit (0.0 for the other variants). All floats,
        measured on 2,048 evaluation sequences that are the same for every run.

    Raises:
        ValueError: if ``variant`` is not in :data:`NO_OP_VARIANTS`.

    Source:
        Miller 2023, "Attention Is Off By One" (blog post, softmax plus one); OpenAI 2025,
        "gpt-oss-120b & gpt-oss-20b Model Card", arXiv:2508.10925, Sec. 2.1 (a learned sink
        logit per head); Xiao et al. 2023, arXiv:2309.17453, Sec. 3.3.
    """
    arguments = dict(variant=variant, seed=seed, steps=steps, vocab_size=vocab_size,
                     seq_len=seq_len, embed_dim=embed_dim, lr=lr)
    if variant not in NO_OP_VARIANTS:
        raise ValueError(f"variant must be one of {NO_OP_VARIANTS}, got {variant!r}")
    return cached("no_op_runs", arguments, lambda: _no_op_run(**arguments))


def _no_op_run(variant, seed, steps, vocab_size, seq_len, embed_dim, lr) -> dict:
    with training._reproducible():
        torch.manual_seed(seed)
        model = NoOpModel(vocab_size, seq_len, embed_dim, variant)
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
        data = torch.Generator().manual_seed(seed)
        for _ in range(steps):
            tokens, targets, _ = no_op_batch(64, seq_len, vocab_size, data)  # (B, L) each
            logits, _, _ = model(tokens)  # (B, L, V)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        evaluation = torch.Generator().manual_seed(12345)  # the same for every run
        tokens, targets, trigger = no_op_batch(2048, seq_len, vocab_size, evaluation)
        trigger[:, 0] = False
        other = ~trigger
        other[:, 0] = False
        with torch.no_grad():
            logits, weights, context = model(tokens)  # (B, L, V), (B, 1, L, L), (B, L, E)
            ablated, _, _ = model(tokens, zero_context=other)
    correct = logits.argmax(-1) == targets  # (B, L)
    mass = weights[:, 0].sum(-1)  # (B, L), weight on real keys
    norm = context.norm(dim=-1)  # (B, L)
    return {
        "accuracy_trigger": correct[trigger].float().mean().item(),
        "accuracy_other": correct[other].float().mean().item(),
        "ablated_other": (ablated.argmax(-1) == targets)[other].float().mean().item(),
        "mass_trigger": mass[trigger].mean().item(),
        "mass_other": mass[other].mean().item(),
        "out_norm_trigger": norm[trigger].mean().item(),
        "out_norm_other": norm[other].mean().item(),
        "sink_logit": model.sink_logit.item(),
    }


# ------------------------------------------------------------------------------------------------
# QK-norm on example 6's model
# ------------------------------------------------------------------------------------------------


class QKNormTinyModel(TinyAttentionModel):
    """Example 6's model with its attention computed explicitly from the same parameters.

    ``qk_norm=True`` adds a :class:`mha_ref.QKNorm` (LayerNorm, as in Dehghani et al. 2023) on
    every head's queries and keys; ``False`` computes what ``nn.MultiheadAttention`` computes.

    Args:
        args, kwargs: as :class:`mha_ref.tutorial.tasks.TinyAttentionModel`.
        qk_norm: Keyword-only; normalise the queries and keys.

    Shape:
        - tokens: ``(batch, seq_len)`` torch.long. Output: logits ``(batch, seq_len,
          vocab_size)`` and weights ``(batch, num_heads, seq_len, seq_len)``, float32.

    Source:
        Dehghani et al. 2023, arXiv:2302.05442, Sec. 2 ("QK normalization").
    """

    def __init__(self, *args, qk_norm: bool, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        attention = self.attention
        self.qk_norm = QKNorm(attention.head_dim) if qk_norm else None

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        attention = self.attention
        seq_len, heads = tokens.shape[1], attention.num_heads
        positions = torch.arange(seq_len, device=tokens.device)  # (L,)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (N, L, E)
        qkv = F.linear(x, attention.in_proj_weight, attention.in_proj_bias)  # (N, L, 3E)
        q, k, v = (t.unflatten(-1, (heads, -1)).transpose(1, 2) for t in qkv.chunk(3, -1))
        if self.qk_norm is not None:  # (N, H, L, head_dim) each
            q, k = self.qk_norm(q, k)
        context, weights = scaled_dot_product_attention(
            q, k, v, causal_mask(seq_len, device=tokens.device), return_weights=True
        )  # (N, H, L, head_dim), (N, H, L, L)
        context = attention.out_proj(context.transpose(1, 2).flatten(2))  # (N, L, E)
        return self.readout(context), weights  # (N, L, V), (N, H, L, L)


@contextlib.contextmanager
def _builder(qk_norm: bool) -> Iterator[None]:
    """Let :func:`mha_ref.tutorial.training._train` build :class:`QKNormTinyModel`."""
    original = training._build_model

    def build(config):
        return QKNormTinyModel(
            config["vocab_size"], config["seq_len"], config["embed_dim"],
            config["num_heads"], config["mlp_hidden"], qk_norm=qk_norm,
        )

    training._build_model = build
    try:
        yield
    finally:
        training._build_model = original


def qk_norm_runs(qk_norm: bool, seed: int, **config) -> dict:
    """Example 6's training run with or without QK-norm, the only factor changed.

    Args:
        qk_norm: add :class:`mha_ref.QKNorm` on the queries and keys.
        seed: the run's seed.
        config: keyword arguments of :func:`mha_ref.tutorial.training.train` (its defaults
            for the others).

    Returns:
        dict: ``accuracy`` (float), ``eval_curve`` (step, accuracy) pairs, ``loss_curve``
        (the training loss after each step), ``entropy``, each head's mean attention entropy
        in nats (a list of floats), and ``max_entropy``, its largest possible value.

    Raises:
        TypeError: if ``config`` holds a name that ``train`` does not take.

    Source:
        Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion Parameters",
        arXiv:2302.05442, Sec. 2 ("QK normalization").
    """
    arguments = dict(config, qk_norm=qk_norm, seed=seed)
    return cached("qk_norm_runs", arguments, lambda: _qk_norm_run(qk_norm, seed, config))


def _qk_norm_run(qk_norm: bool, seed: int, config: dict) -> dict:
    defaults = {k: v.default for k, v in _train_defaults().items()}
    full = dict(defaults, **config, seed=seed)
    full["offsets"] = tuple(full["offsets"])
    with _builder(qk_norm):
        result = training._train(**full)
    return {
        "accuracy": result.accuracy,
        "eval_curve": result.eval_curve,
        "loss_curve": result.loss_curve,
        "entropy": result.entropy.tolist(),
        "max_entropy": result.max_entropy,
    }


def _train_defaults() -> dict:
    import inspect

    return dict(inspect.signature(training.train).parameters)


# ------------------------------------------------------------------------------------------------
# FlexAttention's block masks, eager and compiled
# ------------------------------------------------------------------------------------------------

#: the block size of example 24's block masks, small so that 12 keys make 3 blocks
FLEX_BLOCK_SIZE = 4


def dense_blocks(mask: torch.Tensor, block_size: int) -> torch.Tensor:
    """The blocks of an explicit mask that hold at least one allowed pair.

    FlexAttention's ``BlockMask`` cuts the ``(query_len, key_len)`` grid into
    ``block_size x block_size`` blocks and computes only those that hold an allowed pair; its
    ``to_dense()`` lists them. This is the same list computed from the explicit mask, so the
    two can be compared. A length that is not a multiple of ``block_size`` gets a last, shorter
    block, as in FlexAttention (its missing pairs count as blocked).

    Args:
        mask: bool ``(..., query_len, key_len)``, ``True`` = may attend (expand it to
            ``(batch, num_heads, query_len, key_len)`` to compare with ``to_dense()``).
        block_size: positive int, the block mask's ``BLOCK_SIZE``.

    Returns:
        torch.Tensor: bool ``(..., ceil(query_len / block_size), ceil(key_len / block_size))``.

    Raises:
        TypeError: if ``mask`` is not a bool tensor, or ``block_size`` is not an int.
        ValueError: if ``mask`` has fewer than 2 dimensions or ``block_size`` is not positive.

    Source:
        PyTorch, ``torch.nn.attention.flex_attention.create_block_mask`` and
        ``BlockMask.to_dense``.
    """
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(
            f"dense_blocks: mask must be a bool tensor (True = may attend), got {got}; "
            f"pass an explicit mask such as padding_mask(lengths)[:, None, None, :]."
        )
    if mask.dim() < 2:
        raise ValueError(
            f"dense_blocks: mask must be (..., query_len, key_len), got shape "
            f"{tuple(mask.shape)}; add the query dimension, e.g. mask[None, :]."
        )
    require_positive_int("block_size", block_size, "query and key positions per block")
    query_len, key_len = mask.shape[-2:]
    query_blocks, key_blocks = -(-query_len // block_size), -(-key_len // block_size)
    padded = mask.new_zeros(*mask.shape[:-2], query_blocks * block_size, key_blocks * block_size)
    padded[..., :query_len, :key_len] = mask  # (..., padded query_len, padded key_len)
    tiles = padded.unflatten(-1, (key_blocks, block_size)).unflatten(
        -3, (query_blocks, block_size)
    )  # (..., query_blocks, block_size, key_blocks, block_size)
    return tiles.any(dim=-1).any(dim=-2)  # (..., query_blocks, key_blocks)


def flex_padding_check(
    lengths: Sequence[int] = (12, 7), seed: int = 0, compiled: bool = True
) -> dict:
    """FlexAttention on a padded batch: a block mask built for batch 0 only, and one per batch.

    The padding mask's ``mask_mod`` is ``kv_idx < lengths[b]``: it depends on the batch index
    ``b``. ``create_block_mask(mask_mod, B=None, ...)`` evaluates it for ``b = 0`` only and uses
    those blocks for every batch; ``B=len(lengths)`` evaluates every batch. Each block mask
    (block size :data:`FLEX_BLOCK_SIZE`) is compared with the blocks of the explicit mask
    (:func:`dense_blocks`), and FlexAttention runs with it eagerly and compiled
    (``torch.compile(flex_attention, dynamic=False)``, which needs a C++ compiler on a CPU), on
    float32 queries, keys and values of shape ``(batch, 2, max(lengths), 8)``, compared with
    :func:`mha_ref.scaled_dot_product_attention` in float64 on the same inputs with the explicit
    mask. Compiled FlexAttention on a CPU takes float32, float16 and bfloat16 only. Cached
    (:mod:`mha_ref.tutorial.cache`): the compilation takes several seconds of CPU.

    Args:
        lengths: the real tokens of each sequence; ``max(lengths)`` is the padded length.
        seed: the seed of the random inputs.
        compiled: also run the compiled FlexAttention (``False`` where
            :func:`mha_ref.tutorial.bench.torch_compile_status` finds no C++ compiler).

    Returns:
        dict: for ``"B=None"`` and ``"B=batch"``, a dict with ``"blocks"`` (the block mask's
        ``to_dense()``, ``(batch or 1, 1, blocks, blocks)`` int), ``"blocks_match"`` (bool, the
        blocks equal the explicit mask's for every batch), ``"eager"`` and ``"compiled"``
        (lists of floats, the largest absolute difference from the explicit result, one per
        sequence; ``"compiled"`` is ``None`` when ``compiled`` is ``False``); and
        ``"explicit_blocks"``, :func:`dense_blocks` of the explicit mask,
        ``(batch, 1, blocks, blocks)`` bool.

    Raises:
        ValueError: from :func:`mha_ref.padding_mask` if a length is negative.
        RuntimeError: if ``torch.compile`` cannot build the kernel (inductor's
            ``InductorError``, for example without a C++ compiler: check first with
            :func:`mha_ref.tutorial.bench.torch_compile_status`).

    Source:
        PyTorch, ``torch.nn.attention.flex_attention`` (``create_block_mask``'s ``B`` and ``H``:
        ``None`` broadcasts one block mask over that dimension); eager FlexAttention applies
        ``mask_mod`` to every pair and does not use the blocks (``math_attention`` in
        ``torch/_higher_order_ops/flex_attention.py``).
    """
    arguments = {"lengths": [int(n) for n in lengths], "seed": seed, "compiled": compiled,
                 "block_size": FLEX_BLOCK_SIZE}
    return cached("flex_padding_check", arguments,
                  lambda: _flex_padding_check(arguments["lengths"], seed, compiled))


def _flex_padding_check(lengths: list[int], seed: int, compiled: bool) -> dict:
    import warnings

    import torch._inductor.config as inductor_config
    from torch.nn.attention import flex_attention as flex

    batch, seq_len = len(lengths), max(lengths)
    generator = torch.Generator().manual_seed(seed)
    query, key, value = (torch.randn(batch, 2, seq_len, 8, generator=generator)
                         for _ in range(3))  # each (batch, num_heads, seq_len, head_dim)
    sizes = torch.tensor(lengths)  # (batch,)
    mask = padding_mask(sizes)[:, None, None, :].expand(batch, 1, seq_len, seq_len)  # (B, 1, L, L)
    explicit = scaled_dot_product_attention(
        query.double(), key.double(), value.double(), mask
    )  # (batch, num_heads, seq_len, head_dim)
    expected_blocks = dense_blocks(mask, FLEX_BLOCK_SIZE)  # (batch, 1, blocks, blocks)

    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx < sizes[b]

    def differences(output: torch.Tensor) -> list[float]:
        return [float((output[b].double() - explicit[b]).abs().max()) for b in range(batch)]

    compiled_flex = torch.compile(flex.flex_attention, dynamic=False)
    result = {"explicit_blocks": expected_blocks}
    for name, size in (("B=None", None), ("B=batch", batch)):
        block_mask = flex.create_block_mask(mask_mod, size, None, seq_len, seq_len, device="cpu",
                                            BLOCK_SIZE=FLEX_BLOCK_SIZE)
        blocks = block_mask.to_dense()  # (batch or 1, 1, blocks, blocks)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "flex_attention called without torch.compile"
            eager = flex.flex_attention(query, key, value, block_mask=block_mask)
        fast = None
        if compiled:
            with inductor_config.patch(compile_threads=1):  # no pool of workers left behind
                fast = compiled_flex(query, key, value, block_mask=block_mask)
        result[name] = {
            "blocks": blocks,
            "blocks_match": bool(torch.equal(blocks.bool().expand_as(expected_blocks),
                                             expected_blocks)),
            "eager": differences(eager),
            "compiled": None if fast is None else differences(fast),
        }
    return result
