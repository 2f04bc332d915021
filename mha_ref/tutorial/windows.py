"""Lab code of example 23: sliding windows on the real model, and the receptive field.

``streaming_losses`` runs SmolLM2 on a shipped text seven times, with full causal attention,
with a sliding window only, with the window plus the first few tokens kept (StreamingLLM), and
four one-factor controls: a plain window as wide as the window plus the kept tokens (the same
cache size, recent tokens instead of the first ones), the window plus token 0 alone, and the
window plus one later token alone (token 16, then token 32: one extra slot, as for token 0, but
not the first position). It returns each token's loss. The masks stand for the caches:
attending with ``sliding_window_mask`` is what a :class:`mha_ref.RollingKVCache` decode
computes, token by token (``tests/reference/test_modern_attention.py`` checks the equality), at
a fraction of the cost of decoding 30 layers one token at a time on a CPU. Positions are the
tokens' own (RoPE sees true distances), not StreamingLLM's positions counted inside the cache.

``rolling_decode_logits`` does decode the real model one token at a time, each block reading
its keys and values from its own ring buffer, and ``rolling_decode_check`` compares it with the
masked run on the start of a text: the page prints the comparison.
"""

from __future__ import annotations

import torch

from mha_ref._validation import require_non_negative_int, require_positive_int
from mha_ref.masks import causal_mask, sliding_window_mask
from mha_ref.tutorial.cache import cached

__all__ = [
    "KEPT_CONTROLS",
    "receptive_field",
    "rolling_decode_check",
    "rolling_decode_logits",
    "streaming_losses",
    "window_mask",
]


def window_mask(seq_len: int, window: int, num_sinks: int = 0) -> torch.Tensor:
    """The mask a rolling cache of ``window`` recent tokens and ``num_sinks`` first ones applies.

    Args:
        seq_len: tokens ``L``.
        window: recent tokens each query sees, itself included.
        num_sinks: first tokens every later query also sees (StreamingLLM's attention sinks).

    Returns:
        torch.Tensor: ``(seq_len, seq_len)`` bool, ``True`` = may attend; causal.

    Raises:
        TypeError, ValueError: as :func:`mha_ref.sliding_window_mask` (``window <= 0``, a
            negative length), and for a ``num_sinks`` that is not a non-negative int.

    Source:
        Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks",
        arXiv:2309.17453, Sec. 3.2 (keeping the first tokens).
    """
    require_non_negative_int("num_sinks", num_sinks, "first tokens kept")
    allowed = sliding_window_mask(seq_len, window=window)  # (seq_len, seq_len)
    allowed[:, :num_sinks] |= causal_mask(seq_len)[:, :num_sinks]  # the kept first tokens
    return allowed  # (seq_len, seq_len)


#: the tokens :func:`streaming_losses` keeps, one at a time, in place of token 0 (a control)
KEPT_CONTROLS = (16, 32)


def _window_and_token_mask(seq_len: int, window: int, kept: int) -> torch.Tensor:
    """The sliding-window mask plus one token ``kept`` that every later query also sees.

    Returns ``(seq_len, seq_len)`` bool, ``True`` = may attend; causal. ``kept = 0`` gives
    ``window_mask(seq_len, window, 1)``.
    """
    require_non_negative_int("kept", kept, "the position of the kept token")
    if kept >= seq_len:
        raise ValueError(f"kept must be a position below seq_len={seq_len}, got {kept}.")
    allowed = sliding_window_mask(seq_len, window=window)  # (seq_len, seq_len)
    allowed[kept:, kept] = True  # every query at or after the kept token sees it
    return allowed  # (seq_len, seq_len)


def receptive_field(seq_len: int, window: int, depth: int) -> torch.Tensor:
    """Which tokens can reach which after ``depth`` sliding-window layers.

    Math: the boolean product of ``depth`` copies of the mask: token ``i`` reads token ``j``
    through ``depth`` layers when a chain ``i -> k_1 -> ... -> j`` of allowed steps exists.

    Args:
        seq_len: tokens ``L``.
        window: recent tokens each query sees in one layer, itself included.
        depth: stacked layers (0: each token reaches only itself).

    Returns:
        torch.Tensor: ``(seq_len, seq_len)`` bool, ``[i, j]`` = token ``i`` can read token ``j``.

    Raises:
        TypeError, ValueError: as :func:`mha_ref.sliding_window_mask`, and for a ``depth``
            that is not a non-negative int.

    Source:
        Beltagy et al. 2020, "Longformer", arXiv:2004.05150, Sec. 3.1: ``n`` layers of a
        window ``w`` give a receptive field of ``n * w`` tokens. This package's window is
        counted differently (a query sees itself and the ``w - 1`` keys before it), so after
        ``depth = n`` layers token ``i`` reaches tokens ``i - n * (w - 1)`` to ``i``,
        ``n * (w - 1)`` tokens back (clipped at token 0): what this function returns.
    """
    require_non_negative_int("depth", depth, "stacked layers")
    mask = sliding_window_mask(seq_len, window=window).to(torch.float64)  # (seq_len, seq_len)
    reach = torch.eye(seq_len, dtype=torch.float64)  # (seq_len, seq_len): depth 0
    for _ in range(depth):
        reach = ((reach @ mask) > 0).to(torch.float64)  # (seq_len, seq_len)
    return reach > 0  # (seq_len, seq_len)


def streaming_losses(
    text_name: str, max_tokens: int, window: int, num_sinks: int
) -> dict:
    """Per-token losses of SmolLM2 with full, windowed and window + sinks attention, and the
    controls (cached).

    Args:
        text_name: a shipped text (``mha_ref.tutorial.real_models.texts``).
        max_tokens: tokens of the text used (its first ones).
        window: recent tokens each query sees, itself included.
        num_sinks: first tokens kept for good in the ``"sinks"`` run.

    Returns:
        dict: ``tokens`` ``(L,)``; ``losses``, ``{"full", "window", "sinks", "wide_window",
        "first_token", "token_16", "token_32"}`` -> ``(L - 1,)`` float32 losses in nats
        (entry ``t`` predicts token ``t + 1``): full causal attention, a window of ``window``,
        the window plus the first ``num_sinks`` tokens, a plain window of
        ``window + num_sinks`` (the same cache size as the sinks run), the window plus token 0
        only, and the window plus token 16 only, then token 32 only (one extra slot, as for
        token 0, at another position; :data:`KEPT_CONTROLS`); ``sink_weight``, the mean attention
        weight that full attention gives token 0, per layer ``(num_layers,)``, over the
        queries beyond the window.

    Raises:
        TypeError: if ``max_tokens`` is not an int.
        ValueError: if ``text_name`` is not a shipped text
            (:func:`mha_ref.tutorial.real_models.texts.real_text`), or if ``max_tokens`` is not
            above the last of :data:`KEPT_CONTROLS` (the kept token must be in the text).
        ModelFileError: as :func:`mha_ref.tutorial.real_models.smollm2.load_smollm2`.
        ModuleNotFoundError: as :func:`mha_ref.tutorial.real_models.smollm2.load_smollm2`.

    Source:
        Xiao et al. 2023, arXiv:2309.17453 (StreamingLLM), Sec. 3.1-3.2 (window attention,
        and the window plus the first tokens, against full attention).
    """
    from mha_ref.tutorial.real_models.smollm2 import MODEL_FILE_SHA256
    from mha_ref.tutorial.real_models.texts import text_sha256

    require_positive_int("max_tokens", max_tokens, "tokens of the text used")
    if max_tokens <= max(KEPT_CONTROLS):
        raise ValueError(
            f"max_tokens must be above {max(KEPT_CONTROLS)} (the controls keep tokens "
            f"{KEPT_CONTROLS}), got {max_tokens}."
        )
    arguments = {
        "text": text_sha256(text_name),
        "max_tokens": max_tokens,
        "window": window,
        "num_sinks": num_sinks,
        "model": MODEL_FILE_SHA256,
    }
    def compute() -> dict:
        from mha_ref.tutorial.real_models.loading import model_threads

        with model_threads():  # the real model's measurements run on two threads
            return _losses(text_name, max_tokens, window, num_sinks)

    return cached("streaming_losses", arguments, compute)


def _masked_logits(
    model, tokens: torch.Tensor, attn_mask: torch.Tensor, need_weights: bool = False
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """SmolLM2's forward pass with ``attn_mask`` in every block instead of ``is_causal``.

    Returns the logits ``(1, L, vocab_size)`` and, with ``need_weights``, each block's
    attention weights ``(1, num_heads, L, L)`` (an empty list otherwise).
    """
    residual = model.embed(tokens)  # (1, L, embed_dim)
    all_weights = []
    for block in model.layers:
        attended, weights = block.attention(
            block.attention_norm(residual), attn_mask=attn_mask, need_weights=need_weights
        )  # (1, L, embed_dim), (1, num_heads, L, L) or None
        if need_weights:
            all_weights.append(weights)  # (1, num_heads, L, L)
        residual = residual + attended  # (1, L, embed_dim)
        residual = residual + block.mlp(block.mlp_norm(residual))  # (1, L, embed_dim)
    return model.unembed(residual), all_weights  # (1, L, vocab_size), layers x (1, H, L, L)


def _losses(text_name: str, max_tokens: int, window: int, num_sinks: int) -> dict:
    from mha_ref.tutorial.real_models.layers import next_token_losses
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2
    from mha_ref.tutorial.real_models.texts import real_text

    model = load_smollm2("cpu")
    tokens = model.tokenizer.encode(real_text(text_name))[:max_tokens]  # (L,)
    seq_len = int(tokens.numel())
    masks = {
        "full": causal_mask(seq_len),
        "window": window_mask(seq_len, window),
        "sinks": window_mask(seq_len, window, num_sinks),
        "wide_window": window_mask(seq_len, window + num_sinks),  # same cache size, no sinks
        "first_token": window_mask(seq_len, window, 1),  # the window plus token 0 only
        # the window plus one later token only: an extra slot, not the first position
        **{f"token_{p}": _window_and_token_mask(seq_len, window, p) for p in KEPT_CONTROLS},
    }
    losses = {}
    with torch.no_grad():
        for name, mask in masks.items():
            # the full run also returns its weights, for the attention on token 0
            logits, run_weights = _masked_logits(
                model, tokens[None], mask, need_weights=name == "full"
            )  # (1, L, vocab_size), layers x (1, H, L, L) or []
            losses[name] = next_token_losses(logits, tokens[None])[0]  # (L - 1,)
            if name == "full":
                weights = run_weights  # layers x (1, H, L, L)
    sink_weight = torch.stack([w[0, :, window:, 0].mean() for w in weights])  # (num_layers,)
    return {"tokens": tokens, "losses": losses, "sink_weight": sink_weight}


# ------------------------------------------------------------------------------------------------
# the real model decoded through ring buffers
# ------------------------------------------------------------------------------------------------


def _rolling_attention(attention, x: torch.Tensor, cache, position: torch.Tensor) -> torch.Tensor:
    """One new token through a ``GroupedQueryAttention`` layer with RoPE, its keys and values
    appended to ``cache`` (a :class:`mha_ref.RollingKVCache`); ``x`` is ``(1, 1, embed_dim)``."""
    from mha_ref import merge_heads, repeat_kv_heads, scaled_dot_product_attention, split_heads

    query = split_heads(attention.q_proj(x), attention.num_heads)  # (1, num_heads, 1, head_dim)
    key = split_heads(attention.k_proj(x), attention.num_kv_heads)  # (1, num_kv_heads, 1, hd)
    value = split_heads(attention.v_proj(x), attention.num_kv_heads)  # (1, num_kv_heads, 1, hd)
    query = attention.rope(query, position)  # rotated at the token's own position
    key = attention.rope(key, position)  # cached after rotation, as in GroupedQueryAttention
    keys, values = cache.append(key, value)  # (1, num_kv_heads, visible, head_dim) each
    keys, values = repeat_kv_heads(keys, values, attention.num_heads)  # (1, num_heads, visible, hd)
    context = scaled_dot_product_attention(query, keys, values)  # (1, num_heads, 1, head_dim)
    return attention.out_proj(merge_heads(context))  # (1, 1, embed_dim)


def rolling_decode_logits(
    model, tokens: torch.Tensor, window: int, num_sinks: int = 0
) -> torch.Tensor:
    """SmolLM2 decoded one token at a time, each block's keys and values in a ring buffer.

    Every block gets a :class:`mha_ref.RollingKVCache` of ``num_sinks + window`` slots. Token
    ``t`` goes through the model alone: each block rotates its query and key at position
    ``t``, appends the key and value to its buffer (overwriting the token ``window`` steps
    back, the first ``num_sinks`` tokens staying) and attends, with no mask, to what the buffer
    holds. This is what a server with a fixed-size cache computes; it should equal the masked
    forward pass with :func:`window_mask` (``_masked_logits``) to float32 rounding.

    Args:
        model: a loaded ``SmolLM2`` (:func:`mha_ref.tutorial.real_models.smollm2.load_smollm2`).
        tokens: ``(seq_len,)`` token ids, one text.
        window: recent tokens each query sees, itself included; a positive int.
        num_sinks: first tokens kept for good (StreamingLLM). Default: ``0``.

    Returns:
        torch.Tensor: ``(seq_len, vocab_size)`` float32 logits, row ``t`` predicting token
        ``t + 1``.

    Raises:
        TypeError, ValueError: as :class:`mha_ref.RollingKVCache` (``window <= 0``, a negative
            ``num_sinks``), and as the model's check of ``tokens``.

    Source:
        Jiang et al. 2023, "Mistral 7B", arXiv:2310.06825, Sec. 2 (rolling buffer cache); Xiao
        et al. 2023, arXiv:2309.17453, Sec. 3.2 (keeping the first tokens).
    """
    from mha_ref import RollingKVCache

    config = model.config
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1:
        raise ValueError(
            f"rolling_decode_logits: tokens must be one text's ids, shape (seq_len,), got "
            f"{tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__}"
            f"; pass model.tokenizer.encode(text)."
        )
    caches = [
        RollingKVCache(1, config.num_kv_heads, window, config.head_dim, num_sinks=num_sinks)
        for _ in model.layers
    ]
    logits = []
    for t in range(tokens.numel()):
        position = torch.tensor([t])  # (1,) the token's own position
        residual = model.embed(tokens[None, t : t + 1])  # (1, 1, embed_dim)
        for block, cache in zip(model.layers, caches, strict=True):
            residual = residual + _rolling_attention(
                block.attention, block.attention_norm(residual), cache, position
            )  # (1, 1, embed_dim)
            residual = residual + block.mlp(block.mlp_norm(residual))  # (1, 1, embed_dim)
        logits.append(model.unembed(residual)[0, 0])  # (vocab_size,)
    return torch.stack(logits)  # (seq_len, vocab_size)


def rolling_decode_check(text_name: str, num_tokens: int, window: int, num_sinks: int) -> dict:
    """The ring-buffer decode of the start of a text against the masked forward pass (cached).

    Args:
        text_name: a shipped text (``mha_ref.tutorial.real_models.texts``).
        num_tokens: its first tokens decoded; more than ``num_sinks + window`` for the buffers
            to overwrite.
        window: recent tokens each query sees, itself included.
        num_sinks: first tokens kept for good.

    Returns:
        dict: ``num_tokens``; ``slots`` (``num_sinks + window``, per block);
        ``max_abs_diff``, the largest absolute difference of the two runs' logits;
        ``max_abs_logit``; ``same_choice``, at how many positions the two runs' most likely
        next token agree.

    Raises:
        ValueError: if ``num_tokens`` does not exceed ``num_sinks + window``, or
            ``text_name`` is not a shipped text.
        ModelFileError: as :func:`mha_ref.tutorial.real_models.smollm2.load_smollm2`.
        ModuleNotFoundError: as :func:`mha_ref.tutorial.real_models.smollm2.load_smollm2`.

    Source:
        The equality :class:`mha_ref.RollingKVCache` states, on the real model.
    """
    from mha_ref.tutorial.real_models.smollm2 import MODEL_FILE_SHA256
    from mha_ref.tutorial.real_models.texts import text_sha256

    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or (
        num_tokens <= num_sinks + window
    ):
        raise ValueError(
            f"rolling_decode_check: num_tokens must be an int above num_sinks + window = "
            f"{num_sinks + window}, got {num_tokens!r}; below it no slot is ever overwritten."
        )
    arguments = {
        "text": text_sha256(text_name),
        "num_tokens": num_tokens,
        "window": window,
        "num_sinks": num_sinks,
        "model": MODEL_FILE_SHA256,
    }

    def compute() -> dict:
        from mha_ref.tutorial.real_models.loading import model_threads
        from mha_ref.tutorial.real_models.smollm2 import load_smollm2
        from mha_ref.tutorial.real_models.texts import real_text

        with model_threads(), torch.no_grad():
            model = load_smollm2("cpu")
            tokens = model.tokenizer.encode(real_text(text_name))[:num_tokens]  # (num_tokens,)
            decoded = rolling_decode_logits(model, tokens, window, num_sinks)  # (L, vocab)
            masked, _ = _masked_logits(
                model, tokens[None], window_mask(num_tokens, window, num_sinks)
            )  # (1, L, vocab)
        return {
            "num_tokens": num_tokens,
            "slots": num_sinks + window,
            "max_abs_diff": float((decoded - masked[0]).abs().max()),
            "max_abs_logit": float(masked.abs().max()),
            "same_choice": int((decoded.argmax(-1) == masked[0].argmax(-1)).sum()),
        }

    return cached("rolling_decode_check", arguments, compute)
