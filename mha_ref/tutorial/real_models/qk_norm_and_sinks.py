"""QK-norm and attention sinks in Gemma 3 270M, against SmolLM2: the computations of example 26.

- **QK-norm**: the attention logits each block can produce (:func:`attention_logits`), in a model
  that normalises its queries and keys (Gemma 3) and in one that does not (SmolLM2); and what
  the loss does when the norms' learned gains are set to one, or the norms removed.
- **Sinks**: how much attention every block puts on the first token (``<bos>``) while every
  block can see it and after it has left the local blocks' window
  (:func:`first_token_mass`), what the local blocks attend to instead, the size of the first
  token's value vector, and what giving the local blocks the first token back does to the loss
  (StreamingLLM's fix, on a model trained without it).

Every number is measured on the first :data:`NUM_TOKENS` tokens of :data:`TEXTS`, shipped texts
of the Python documentation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from mha_ref.grouped import GroupedQueryAttention
from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.real_models.layers import next_token_losses

__all__ = [
    "EDGE",
    "NUM_TOKENS",
    "SHORT_TOKENS",
    "TEXTS",
    "attention_logits",
    "first_token_mass",
    "logit_bound",
    "qk_norm_and_sinks_analysis",
]

#: the shipped texts measured (:mod:`mha_ref.tutorial.real_models.texts`), one sequence each
TEXTS = ("execution_model", "import_statement", "try_statement")
#: tokens read from each text, ``<bos>`` included, 128 past the 512-key window
NUM_TOKENS = 640
#: the first tokens of each text on which the logits and the QK-norm interventions are measured
SHORT_TOKENS = 128
#: the queries just before the window's end whose weight on ``<bos>`` is compared with the later
#: ones' (position changes that weight too)
EDGE = 64


def attention_logits(attention: GroupedQueryAttention, x: torch.Tensor) -> torch.Tensor:
    """The scaled scores ``q . k * scale`` of one attention layer, before mask and softmax.

    The same steps as :meth:`mha_ref.GroupedQueryAttention.forward` up to the scores:
    projections, the head split, QK-norm where the layer has it, the rotation of queries and
    keys at their positions, then every query against every key (the causal mask is not
    applied: take the entries ``j <= i``).

    Args:
        attention: a layer with ``rope`` (a loaded model's ``block.attention``).
        x: ``(batch, seq_len, embed_dim)``, the layer's input (after the block's first norm).

    Returns:
        torch.Tensor: ``(batch, num_heads, seq_len, seq_len)``, float32.

    Source:
        Vaswani et al. 2017, arXiv:1706.03762, eq. 1 (the scaled scores); Dehghani et al.
        2023, arXiv:2302.05442, Sec. 3.1 (QK-norm).
    """
    batch, seq_len, _ = x.shape
    queries = attention.q_proj(x).unflatten(-1, (attention.num_heads, -1)).transpose(1, 2)
    keys = attention.k_proj(x).unflatten(-1, (attention.num_kv_heads, -1)).transpose(1, 2)
    # queries (batch, num_heads, seq_len, head_dim); keys (batch, num_kv_heads, seq_len, hd)
    if attention.qk_norm is not None:
        queries, keys = attention.qk_norm(queries, keys)  # the same shapes
    positions = torch.arange(seq_len)  # (seq_len,)
    queries, keys = attention.rope(queries, positions), attention.rope(keys, positions)
    group = attention.num_heads // attention.num_kv_heads
    keys = keys.repeat_interleave(group, dim=1)  # (batch, num_heads, seq_len, head_dim)
    scale = attention.head_dim**-0.5 if attention.scale is None else attention.scale
    return queries @ keys.transpose(-2, -1) * scale  # (batch, num_heads, seq_len, seq_len)


def logit_bound(attention: GroupedQueryAttention) -> float:
    r"""The largest ``|q . k * scale|`` a layer with RMS QK-norm can produce, from its gains.

    Math: RMS normalisation gives :math:`\hat q = g \odot q / \mathrm{rms}(q)`, and
    :math:`\|q / \mathrm{rms}(q)\|^2 = d`, so :math:`\|\hat q\| \le \sqrt d \max_i |g_i|`;
    the rotation keeps norms, so
    :math:`|\hat q \cdot \hat k|\,s \le s\, d \max|g^q| \max|g^k|` whatever the input
    (``eps`` only lowers it).

    Args:
        attention: a layer whose ``qk_norm`` is an RMS :class:`mha_ref.QKNorm`.

    Returns:
        float: the bound.

    Raises:
        ValueError: if the layer has no QK-norm.

    Source:
        Dehghani et al. 2023, arXiv:2302.05442, Sec. 3.1; Wortsman et al. 2023,
        arXiv:2309.14322, Sec. 3.1.2 (QK-norm against attention-logit growth).
    """
    norm = attention.qk_norm
    if norm is None:
        raise ValueError("logit_bound needs a layer with QK-norm (qk_norm is None).")
    scale = attention.head_dim**-0.5 if attention.scale is None else attention.scale
    gains = norm.query_norm.weight.detach().abs().max() * norm.key_norm.weight.detach().abs().max()
    return float(scale * attention.head_dim * gains)


def first_token_mass(weights: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Mean attention weight on key 0 of the queries ``start .. stop - 1``, per head.

    Args:
        weights: ``(batch, num_heads, seq_len, seq_len)``, one layer's attention weights.
        start, stop: the queries averaged, ``1 <= start < stop <= seq_len``.

    Returns:
        torch.Tensor: ``(num_heads,)``, in ``[0, 1]``, averaged over the batch.

    Raises:
        ValueError: if the range is empty or outside the sequence.

    Source:
        Xiao et al. 2023, arXiv:2309.17453, Sec. 3.1 (attention sinks).
    """
    if not 1 <= start < stop <= weights.shape[-2]:
        raise ValueError(
            f"need 1 <= start < stop <= seq_len={weights.shape[-2]}, got start={start}, "
            f"stop={stop}."
        )
    return weights[:, :, start:stop, 0].mean(dim=(0, 2))  # (num_heads,)


# ------------------------------------------------------------------------------------------------
# example 26's measurements, cached
# ------------------------------------------------------------------------------------------------


def qk_norm_and_sinks_analysis() -> dict:
    """Example 26's measurements on Gemma 3 270M and SmolLM2 (cached by both files' SHA-256,
    the texts' and the arguments).

    Returns:
        dict: ``"logit_max"`` ``{"gemma3": (num_layers,), "smollm2": (num_layers,)}``, the
        largest ``|q . k * scale|`` of each block over the causal entries of the first
        :data:`SHORT_TOKENS`
        tokens; ``"logit_bound"`` ``(num_layers,)``, Gemma's :func:`logit_bound` per block;
        ``"qk_losses"`` ``{"as trained", "gains set to 1", "no QK-norm"}``, each
        ``(texts,)`` mean loss of Gemma on its first :data:`SHORT_TOKENS` tokens; ``"first_mass"``
        ``{"before", "edge", "after"}``, each ``(num_layers, num_heads)``, Gemma's weight on
        ``<bos>`` from the queries before 512, from the :data:`EDGE` queries just before 512,
        and from 512 on; ``"oldest_mass"``
        ``(num_layers, num_heads)``, the weight on the oldest key a local block still sees
        (511 back) from 512 on; ``"value_norms"`` ``{model: (num_layers, 2)}``, the norm of
        ``<bos>``'s value vector and the mean norm of the other tokens'; ``"sink_losses"``
        ``{"window", "window and first token", "no block sees the first token"}``, each
        ``(texts,)``, Gemma's mean loss on the predictions made from position 512 on, the local
        blocks seeing their window, or their window and ``<bos>``, or no block seeing ``<bos>``
        from there on; ``"global_layers"``, ``"window"``.

    Raises:
        ModelFileError, ModuleNotFoundError: as
            :func:`~mha_ref.tutorial.real_models.gemma3.load_gemma3` (not when cached).
    """
    from mha_ref.tutorial.real_models.gemma3 import MODEL_FILE_SHA256
    from mha_ref.tutorial.real_models.smollm2 import MODEL_FILE_SHA256 as SMOLLM2_SHA256
    from mha_ref.tutorial.real_models.texts import text_sha256

    arguments = {"model": MODEL_FILE_SHA256, "smollm2": SMOLLM2_SHA256,
                 "texts": {name: text_sha256(name) for name in TEXTS}, "tokens": NUM_TOKENS}
    return cached("gemma3_qk_norm_and_sinks", arguments, _in_threads)


def _in_threads() -> dict:
    from mha_ref.tutorial.real_models.loading import model_threads

    with model_threads():
        return _qk_norm_and_sinks()


def _tokens(model) -> torch.Tensor:
    """The first :data:`NUM_TOKENS` tokens of each text, ``(texts, NUM_TOKENS)``."""
    from mha_ref.tutorial.real_models.texts import real_text

    return torch.stack([model.tokenizer.encode(real_text(name))[:NUM_TOKENS] for name in TEXTS])


def _qk_norm_and_sinks() -> dict:
    from mha_ref.tutorial.real_models.gemma3 import load_gemma3
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2

    gemma, smollm2 = load_gemma3("cpu"), load_smollm2("cpu")
    tokens = _tokens(gemma)  # (texts, NUM_TOKENS)
    window = gemma.config.sliding_window
    residual, weights, values = _weights_and_values(gemma, tokens)
    local = [b for b in range(gemma.config.num_layers) if b not in gemma.config.global_layers]
    oldest = torch.zeros(gemma.config.num_layers, gemma.config.num_heads)
    queries = torch.arange(window, NUM_TOKENS)  # (NUM_TOKENS - window,)
    for b in local:  # the oldest key still in the window: window - 1 back
        oldest[b] = weights[b][:, :, queries, queries - window + 1].mean(dim=(0, 2))
    short = tokens[:, :SHORT_TOKENS]  # (texts, SHORT_TOKENS)
    smollm2_short = _tokens(smollm2)[:, :SHORT_TOKENS]  # (texts, SHORT_TOKENS)
    return {
        "logit_max": {"gemma3": _logit_max(gemma, short),
                      "smollm2": _logit_max(smollm2, smollm2_short)},
        "logit_bound": torch.tensor([logit_bound(b.attention) for b in gemma.layers]),
        "qk_losses": _qk_norm_losses(gemma, short),
        "first_mass": {
            "before": torch.stack([first_token_mass(w, 1, window) for w in weights]),
            "edge": torch.stack([first_token_mass(w, window - EDGE, window) for w in weights]),
            "after": torch.stack([first_token_mass(w, window, NUM_TOKENS) for w in weights]),
        },
        "oldest_mass": oldest,
        "value_norms": {"gemma3": values,
                        "smollm2": _weights_and_values(smollm2, smollm2_short)[2]},
        "sink_losses": _sink_losses(gemma, tokens, residual),
        "global_layers": list(gemma.config.global_layers),
        "window": window,
        "configs": {"smollm2": dataclasses.asdict(smollm2.config)},
    }


def _weights_and_values(model, tokens: torch.Tensor):
    """The last block's output, every block's attention weights, and per block the norm of
    ``<bos>``'s value vector and the mean norm of the other tokens' (``(num_layers, 2)``)."""
    norms = []

    def hook(module, args, output):  # output: (batch, seq_len, num_kv_heads * head_dim)
        per_token = output.norm(dim=-1)  # (batch, seq_len)
        norms.append(torch.stack([per_token[:, 0].mean(), per_token[:, 1:].mean()]))

    handles = [block.attention.v_proj.register_forward_hook(hook) for block in model.layers]
    try:
        with torch.no_grad():
            residual, weights = model.run_layers(model.embed(tokens), need_weights=True)
    finally:
        for handle in handles:
            handle.remove()
    return residual, weights, torch.stack(norms)  # (batch, L, d), layers x (...), (layers, 2)


def _logit_max(model, tokens: torch.Tensor) -> torch.Tensor:
    """The largest ``|logit|`` over the causal entries, per block, ``(num_layers,)``."""
    inputs = []
    handles = [block.attention.register_forward_hook(
        lambda module, args, output: inputs.append(args[0])) for block in model.layers]
    try:
        with torch.no_grad():
            model.run_layers(model.embed(tokens))
            causal = torch.ones(tokens.shape[1], tokens.shape[1], dtype=torch.bool).tril()
            return torch.stack([
                attention_logits(block.attention, x)[..., causal].abs().max()
                for block, x in zip(model.layers, inputs, strict=True)
            ])  # (num_layers,)
    finally:
        for handle in handles:
            handle.remove()


def _mean_losses(model, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.token_losses(tokens).mean(dim=1)  # (texts,)


def _qk_norm_losses(model, tokens: torch.Tensor) -> dict:
    """Mean losses as trained, with every QK-norm gain set to 1, and with no QK-norm."""
    norms = [block.attention.qk_norm for block in model.layers]
    return {
        "as trained": _mean_losses(model, tokens),
        "gains set to 1": _changed(model, tokens, lambda: _set_gains(norms, 1.0)),
        "no QK-norm": _changed(model, tokens, lambda: _remove_norms(model)),
    }


def _changed(model, tokens: torch.Tensor, change: Callable[[], Callable[[], None]]):
    """Mean losses with ``change()`` applied; ``change`` returns the function that undoes it."""
    undo = change()
    try:
        return _mean_losses(model, tokens)
    finally:
        undo()


def _set_gains(norms, value: float) -> Callable[[], None]:
    saved = [(n.query_norm.weight.clone(), n.key_norm.weight.clone()) for n in norms]
    for norm in norms:
        norm.query_norm.weight.fill_(value)
        norm.key_norm.weight.fill_(value)

    def undo() -> None:
        for norm, (q, k) in zip(norms, saved, strict=True):
            norm.query_norm.weight.copy_(q)
            norm.key_norm.weight.copy_(k)

    return undo


def _remove_norms(model) -> Callable[[], None]:
    saved = [block.attention.qk_norm for block in model.layers]
    for block in model.layers:
        block.attention.qk_norm = None

    def undo() -> None:
        for block, norm in zip(model.layers, saved, strict=True):
            block.attention.qk_norm = norm

    return undo


def _sink_losses(model, tokens: torch.Tensor, clean: torch.Tensor) -> dict:
    """Mean loss on the predictions made from position ``window`` on (where a local block's
    window no longer holds ``<bos>``): the local blocks seeing their window (as trained:
    ``clean`` is the last block's output of that run); seeing their window and ``<bos>``
    (StreamingLLM's mask); and, as a control, the global blocks no longer seeing ``<bos>`` from
    there on either (no block sees it)."""
    from mha_ref.masks import causal_mask
    from mha_ref.tutorial.windows import window_mask

    window = model.config.sliding_window

    def later(residual: torch.Tensor) -> torch.Tensor:  # logits only where they are scored
        with torch.no_grad():
            logits = model.unembed(residual[:, window:])  # (texts, L - window, vocab)
        return next_token_losses(logits, tokens[:, window:]).mean(dim=1)  # (texts,)

    def without_bos(seq_len: int, device) -> torch.Tensor:
        allowed = causal_mask(seq_len, device=device)  # (seq_len, seq_len), True = may attend
        allowed[window:, 0] = False  # <bos> hidden from the queries the windows have lost it for
        return allowed

    def run(masks: dict) -> torch.Tensor:
        for block, mask in masks.items():  # an instance attribute hides the class's method
            block.attention_mask = mask
        try:
            with torch.no_grad():
                residual, _ = model.run_layers(model.embed(tokens))  # (texts, L, embed_dim)
        finally:
            for block in masks:
                del block.attention_mask
        return later(residual)

    local = [b for b in model.layers if b.sliding_window is not None]
    global_ = [b for b in model.layers if b.sliding_window is None]
    kept = {b: (lambda seq_len, device: window_mask(seq_len, window, 1)) for b in local}
    return {
        "window": later(clean),
        "window and first token": run(kept),
        "no block sees the first token": run({b: without_bos for b in global_}),
    }
