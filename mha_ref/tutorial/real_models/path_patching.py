r"""Path patching: which input of a head (query, key or value) carries an earlier head's effect.

A head can read what an earlier head wrote into the residual stream through any of its three
inputs: its queries (Q-composition), its keys (K-composition) or its values (V-composition)
(Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits", section "Three Kinds
of Composition"). Removing the earlier head (the *sender*) changes all three inputs of every
later head at once, so an ablation cannot say which of them carries the effect. Path patching
can (Wang et al. 2022, "Interpretability in the Wild", arXiv:2211.00593, Sec. 3.1): the
sender is ablated in a run of its own, and only the chosen input of the chosen later heads (the
*receivers*) reads that run's residual stream; the receivers' other inputs read the clean
stream, and the rest of the model (the other heads, the MLPs, the blocks after) runs as usual
on what the patched run carries.

Here, as in Elhage et al.'s and Olsson et al.'s (2022, arXiv:2209.11895) test of an induction
circuit, the sender is a previous-token head and the receivers are the induction heads after
it. The receivers' input is the **whole** ablated stream entering their block: the sender's
direct path and its paths through the blocks between (Wang et al. freeze the heads between to
keep the direct path alone). The pieces:

* :func:`ablated_streams`: the residual stream entering each block with the sender ablated
  (:func:`~mha_ref.tutorial.real_models.heads.ablate_heads`), from the clean streams of
  :func:`~mha_ref.tutorial.real_models.heads.clean_streams`;
* :func:`attention_inputs`: a block's query, key and value inputs, each the RMS-normalised
  clean or ablated stream;
* :func:`head_outputs_from` and :func:`head_weights_from`: the block's own attention module
  run on those three inputs, each head's output and attention weights;
* :func:`replace_head_outputs`: the receivers' outputs put into the block's forward pass;
* :func:`path_patched_losses`: the model run from the first receiver's block with all of that;
* :func:`path_patching_analysis`: example 17's measurement, cached.

Layers and heads are numbered from 0.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from contextlib import contextmanager

import torch

from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.real_models.heads import (
    _group_by_layer,
    ablate_heads,
    ablated_token_losses,
    clean_streams,
    induction_scores,
    random_repeated_tokens,
)
from mha_ref.tutorial.real_models.smollm2_heads import OTHER_SEEDS, REPEATED, _arguments

__all__ = [
    "PATCH_INPUTS",
    "PATCH_SEEDS",
    "PATHS",
    "ablated_streams",
    "attention_inputs",
    "head_outputs_from",
    "head_weights_from",
    "path_patched_losses",
    "path_patching_analysis",
    "replace_head_outputs",
]

#: the three inputs of a head that a patch can feed with the ablated stream
PATCH_INPUTS = ("query", "key", "value")
#: the patches of :func:`path_patching_analysis`: one input alone, then all three
PATHS = {"key": ("key",), "query": ("query",), "value": ("value",), "all three": PATCH_INPUTS}
#: the seeds of example 17's random sequences (the page's, then ``OTHER_SEEDS``)
PATCH_SEEDS = (REPEATED["seed"], *OTHER_SEEDS)


def _check_streams(model, streams: Sequence[torch.Tensor], name: str) -> None:
    """Raise unless ``streams`` holds ``num_layers + 1`` streams of one shape."""
    expected = model.config.num_layers + 1
    if len(streams) != expected or len({tuple(s.shape) for s in streams}) != 1:
        raise ValueError(
            f"{name} must hold {expected} residual streams of one shape (batch, seq_len, "
            f"embed_dim), one entering each block and one leaving the last; got {len(streams)}. "
            f"Compute them with clean_streams(model, tokens) (and ablated_streams)."
        )


def ablated_streams(model, streams: Sequence[torch.Tensor], heads) -> list[torch.Tensor]:
    """The residual stream entering each block (and leaving the last) with ``heads`` ablated.

    The blocks before the first ablated one are not changed by the ablation, so their streams
    are the clean ones; from that block on, each block is rerun under
    :func:`~mha_ref.tutorial.real_models.heads.ablate_heads` (zero ablation).

    Args:
        model: a loaded ``SmolLM2``.
        streams: ``clean_streams(model, tokens)``, ``num_layers + 1`` tensors
            ``(batch, seq_len, embed_dim)``.
        heads: ``(block, head)`` pairs to zero-ablate.

    Returns:
        list[torch.Tensor]: ``num_layers + 1`` tensors ``(batch, seq_len, embed_dim)``,
        float32; entry ``l`` enters block ``l``. The last gives the same losses, bit for bit, as
        :func:`~mha_ref.tutorial.real_models.heads.ablated_token_losses`.

    Raises:
        TypeError, ValueError: as :func:`~mha_ref.tutorial.real_models.heads.ablate_heads` (a head
            that is not a pair or does not exist), or if ``streams`` does not hold
            ``num_layers + 1`` streams of one shape.

    Source:
        Michel et al. 2019, arXiv:1905.10650, Sec. 2 (head masking); the residual stream view
        of Elhage et al. 2021.
    """
    _check_streams(model, streams, "streams")
    heads = list(heads)
    first = min(_group_by_layer(model, heads), default=model.config.num_layers)
    ablated = list(streams[: first + 1])  # unchanged up to the first ablated block
    residual = streams[first]  # (batch, seq_len, embed_dim)
    with torch.no_grad(), ablate_heads(model, heads):
        for layer in range(first, model.config.num_layers):
            residual, _ = model.run_layers(residual, layer, layer + 1)  # (batch, L, embed_dim)
            ablated.append(residual)  # stream entering block layer + 1
    return ablated


def attention_inputs(
    block, clean: torch.Tensor, ablated: torch.Tensor, patched: Collection[str]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A block's three attention inputs: the ablated stream where patched, the clean elsewhere.

    The block is pre-norm, so each input is the stream after the block's ``attention_norm``
    (RMSNorm), as in the block's own forward pass.

    Args:
        block: a ``SmolLM2Block``.
        clean: ``(batch, seq_len, embed_dim)``, the clean stream entering the block (an
            entry of :func:`~mha_ref.tutorial.real_models.heads.clean_streams`).
        ablated: ``(batch, seq_len, embed_dim)``, the stream entering the block with the
            sender ablated (an entry of :func:`ablated_streams`).
        patched: the inputs that read ``ablated``, a subset of :data:`PATCH_INPUTS`
            (``()``: none).

    Returns:
        tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ``(query, key, value)`` inputs, each
        ``(batch, seq_len, embed_dim)`` float32.

    Raises:
        ValueError: if ``patched`` names something other than ``"query"``, ``"key"`` or
            ``"value"``, or the two streams differ in shape.

    Source:
        Elhage et al. 2021, "Three Kinds of Composition"; Wang et al. 2022, arXiv:2211.00593,
        Sec. 3.1 (a receiver's input patched, the rest of the run left as it is).
    """
    unknown = set(patched) - set(PATCH_INPUTS)
    if isinstance(patched, str) or unknown:
        raise ValueError(
            f"patched must be a collection of input names from {PATCH_INPUTS}, got "
            f"{patched!r}. Example: patched=('key',)."
        )
    if clean.shape != ablated.shape:
        raise ValueError(
            f"clean and ablated must be streams of one input, got shapes {tuple(clean.shape)} "
            f"and {tuple(ablated.shape)}."
        )
    normed = block.attention_norm(clean)  # (batch, seq_len, embed_dim)
    normed_ablated = block.attention_norm(ablated)  # (batch, seq_len, embed_dim)
    query, key, value = (normed_ablated if name in patched else normed for name in PATCH_INPUTS)
    return query, key, value  # each (batch, seq_len, embed_dim)


def head_outputs_from(
    attention, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
) -> torch.Tensor:
    """Each head's output when the block's attention reads separate query, key, value inputs.

    A head's output is what it puts into ``out_proj`` (its ``head_dim`` slice of the merged
    heads), read by a forward pre-hook on ``out_proj`` while the block's own
    :class:`~mha_ref.GroupedQueryAttention` runs causally on the three inputs, on the path
    the block's forward pass takes (PyTorch's fused kernel): with the same tensor for all
    three, the numbers of the block's forward pass, bit for bit.

    Args:
        attention: a block's ``GroupedQueryAttention`` (``block.attention``).
        query, key, value: ``(batch, seq_len, embed_dim)``, from :func:`attention_inputs`.

    Returns:
        torch.Tensor: ``(batch, seq_len, num_heads, head_dim)`` float32.

    Raises:
        TypeError, ValueError: as :meth:`mha_ref.GroupedQueryAttention.forward` (shapes that
            do not fit, another dtype or device).

    Source:
        Elhage et al. 2021 (each head reads its queries, keys and values from the residual
        stream through its own weights); the head's output of Michel et al. 2019,
        arXiv:1905.10650, Sec. 2.
    """
    captured = []
    handle = attention.out_proj.register_forward_pre_hook(
        lambda module, inputs: captured.append(inputs[0])  # (batch, seq_len, embed_dim)
    )
    try:
        with torch.no_grad():
            attention(query, key, value, is_causal=True)
    finally:
        handle.remove()
    return captured[0].unflatten(-1, (attention.num_heads, attention.head_dim))  # (b, L, h, hd)


def head_weights_from(
    attention, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
) -> torch.Tensor:
    """Each head's attention weights when the block's attention reads separate inputs.

    The weights depend on the query and key inputs only; ``value`` is passed so that the call
    is the block's attention as it runs (explicit path, ``need_weights=True``).

    Args:
        attention: a block's ``GroupedQueryAttention``.
        query, key, value: ``(batch, seq_len, embed_dim)``, from :func:`attention_inputs`.

    Returns:
        torch.Tensor: ``(batch, num_heads, seq_len, seq_len)`` float32, causal rows summing to 1.

    Raises:
        TypeError, ValueError: as :meth:`mha_ref.GroupedQueryAttention.forward`.

    Source:
        Elhage et al. 2021, "Three Kinds of Composition" (Q- and K-composition move the
        weights; V-composition cannot).
    """
    with torch.no_grad():
        _, weights = attention(query, key, value, is_causal=True, need_weights=True)  # (b,h,L,L)
    return weights  # (batch, num_heads, seq_len, seq_len)


@contextmanager
def replace_head_outputs(block, heads: Iterable[int], outputs: torch.Tensor):
    """Inside the ``with`` block, these heads of ``block`` output ``outputs`` instead.

    A forward pre-hook on the block's ``out_proj`` (as in
    :func:`~mha_ref.tutorial.real_models.heads.ablate_heads`) puts ``outputs[..., h, :]`` in head
    ``h``'s slice; the other heads keep what the block computes. Leaving the ``with`` block
    removes the hook, even after an exception.

    Args:
        block: a ``SmolLM2Block``.
        heads: query head indices of this block.
        outputs: ``(batch, seq_len, num_heads, head_dim)``, from :func:`head_outputs_from`.

    Yields:
        None.

    Raises:
        ValueError: if a head is out of range.

    Source:
        Wang et al. 2022, arXiv:2211.00593, Sec. 3.1 (the receivers' patched activations put
        into an otherwise clean run).
    """
    num_heads = block.attention.num_heads
    index = sorted(set(heads))
    if any(not 0 <= h < num_heads for h in index):
        raise ValueError(f"heads must be in 0 .. {num_heads - 1}, got {index}.")
    index = torch.tensor(index)  # (k,)

    def hook(module, inputs):
        split = inputs[0].unflatten(-1, (num_heads, -1)).clone()  # (batch, L, heads, head_dim)
        split[..., index, :] = outputs[..., index, :]  # (batch, L, k, head_dim)
        return (split.flatten(-2),)  # (batch, seq_len, embed_dim)

    handle = block.attention.out_proj.register_forward_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def path_patched_losses(
    model,
    streams: Sequence[torch.Tensor],
    ablated: Sequence[torch.Tensor],
    tokens: torch.Tensor,
    receivers,
    patched: Collection[str],
) -> tuple[torch.Tensor, dict[tuple[int, int], torch.Tensor]]:
    """Next-token losses when only the ``patched`` inputs of the receivers read the ablated
    stream, and their other inputs the clean stream.

    The run starts at the first receiver's block on the clean stream (the blocks before are
    unchanged). In a block with receivers, the receivers' outputs come from the block's
    attention on :func:`attention_inputs` of the clean and the ablated stream entering that
    block, so each receiver depends on the patch of its own inputs only (not on a receiver
    patched in an earlier block); the block's other heads, its MLP and every later block run
    as usual, on what the run carries. With ``patched=()`` the losses are the clean ones, bit
    for bit; with all three inputs each receiver computes exactly what it computes in the
    ablated run; with the value alone no receiver's weights change.

    Args:
        model: a loaded ``SmolLM2``.
        streams: ``clean_streams(model, tokens)``.
        ablated: ``ablated_streams(model, streams, [sender])``.
        tokens: ``(batch, seq_len)`` torch.long, the ids of the streams.
        receivers: ``(block, head)`` pairs whose inputs are patched.
        patched: a subset of :data:`PATCH_INPUTS`.

    Returns:
        tuple: ``losses`` ``(batch, seq_len - 1)`` float32 nats (entry ``t`` predicts token
        ``t + 1``), and ``{(block, head): (batch, seq_len, seq_len)}``, each receiver's
        attention weights in this run.

    Raises:
        TypeError, ValueError: as :func:`attention_inputs` and
            :func:`~mha_ref.tutorial.real_models.heads.ablate_heads` (a bad head, an unknown
            input name), or if the streams do not fit ``tokens``.

    Source:
        Wang et al. 2022, arXiv:2211.00593, Sec. 3.1 (path patching); Elhage et al. 2021
        (Q-, K- and V-composition).
    """
    from mha_ref.tutorial.real_models.layers import next_token_losses

    tokens = model.check_tokens(tokens, min_len=2)  # (batch, seq_len)
    for name, given in (("streams", streams), ("ablated", ablated)):
        _check_streams(model, given, name)
        if given[0].shape[:2] != tokens.shape:
            raise ValueError(
                f"{name} are streams of an input of shape {tuple(given[0].shape[:2])}, not of "
                f"tokens {tuple(tokens.shape)}. Compute them from these tokens."
            )
    attention_inputs(model.layers[0], streams[0], ablated[0], patched)  # checks patched
    by_layer = _group_by_layer(model, receivers)
    first = min(by_layer, default=model.config.num_layers)
    residual = streams[first]  # (batch, seq_len, embed_dim), clean up to the first receiver
    weights = {}
    with torch.no_grad():
        for layer in range(first, model.config.num_layers):
            block = model.layers[layer]
            if layer not in by_layer:
                residual, _ = model.run_layers(residual, layer, layer + 1)  # (b, L, embed_dim)
                continue
            inputs = attention_inputs(block, streams[layer], ablated[layer], patched)
            # inputs: query, key, value, each (batch, seq_len, embed_dim)
            outputs = head_outputs_from(block.attention, *inputs)  # (b, L, heads, head_dim)
            layer_weights = head_weights_from(block.attention, *inputs)  # (b, heads, L, L)
            for head in by_layer[layer]:
                weights[(layer, head)] = layer_weights[:, head]  # (batch, seq_len, seq_len)
            with replace_head_outputs(block, by_layer[layer], outputs):
                residual, _ = model.run_layers(residual, layer, layer + 1)  # (b, L, embed_dim)
        losses = next_token_losses(model.unembed(residual), tokens)  # (batch, seq_len - 1)
    return losses, weights  # (batch, seq_len - 1), {head: (batch, seq_len, seq_len)}


# ------------------------------------------------------------------------------------------------
# example 17's measurement, cached on disk (the second language reuses it)
# ------------------------------------------------------------------------------------------------


def path_patching_analysis(sender: tuple[int, int], receivers, seeds=PATCH_SEEDS) -> dict:
    """Example 17's path patching: the sender zero-ablated, each of :data:`PATHS` patched into
    the receivers, on the repeated random sequences of each seed.

    Args:
        sender: the ``(block, head)`` ablated (the previous-token head).
        receivers: ``(block, head)`` pairs in later blocks (the induction heads).
        seeds: seeds of :func:`~mha_ref.tutorial.real_models.heads.random_repeated_tokens` with
            example 17's length and batch (``REPEATED``).

    Returns:
        dict: ``{seed: run}``; each ``run`` holds second-copy losses (nats per token)
        ``"clean"``, ``"ablated"`` (the sender ablated everywhere) and ``"patched"``
        ``{path: loss}``, and the receivers' induction scores ``"clean_induction"``
        ``{head: score}`` and ``"induction"`` ``{path: {head: score}}``. Cached by the model
        file's SHA-256 and the arguments (:mod:`mha_ref.tutorial.cache`).

    Raises:
        ValueError: if a receiver is not in a block after the sender's (its input would not
            change), or as :func:`path_patched_losses`.

    Source:
        Wang et al. 2022, arXiv:2211.00593, Sec. 3.1; Elhage et al. 2021; the second-copy
        loss and the induction score of Olsson et al. 2022, arXiv:2209.11895, Sec. 2.
    """
    sender = tuple(sender)
    receivers = [tuple(pair) for pair in receivers]
    if any(layer <= sender[0] for layer, _ in receivers):
        raise ValueError(
            f"every receiver must be in a block after the sender's (block {sender[0]}), got "
            f"{receivers}: the sender cannot change an earlier block's input."
        )
    arguments = _arguments(**REPEATED, sender=list(sender), receivers=sorted(receivers),
                           seeds=list(seeds), paths={k: list(v) for k, v in PATHS.items()})
    arguments.pop("text")  # only random tokens are read
    # defined here, not with heads' _in_model_threads: the cache key hashes the import closure
    # of the module that defines the computation, and this module's code is part of it
    return cached("smollm2_path_patching", arguments,
                  lambda: _path_patching(sender, receivers, tuple(seeds)))


def _path_patching(sender, receivers, seeds) -> dict:
    from mha_ref.tutorial.real_models.loading import model_threads
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2

    model = load_smollm2("cpu")
    with model_threads():
        return {seed: _patch_one_seed(model, sender, receivers, seed) for seed in seeds}


def _patch_one_seed(model, sender, receivers, seed: int) -> dict:
    """The measurements of :func:`path_patching_analysis` on one seed's random sequences."""
    from mha_ref.tutorial.real_models.layers import next_token_losses

    half_len = REPEATED["half_len"]
    repeated = random_repeated_tokens(half_len, REPEATED["batch"], seed=seed,
                                      vocab_size=model.config.vocab_size)  # (2, 100)
    streams = clean_streams(model, repeated)  # num_layers + 1 x (2, 100, embed_dim)
    ablated = ablated_streams(model, streams, [sender])  # the same with the sender ablated

    def second_copy(losses: torch.Tensor) -> float:  # losses (batch, 2n - 1)
        return float(losses[:, half_len:].mean())

    def scores(weights: dict) -> dict:  # {head: (batch, 2n, 2n)} -> {head: score}
        return {head: float(induction_scores(w[:, None], half_len)[0])
                for head, w in weights.items()}

    clean_weights = {
        (layer, head): head_weights_from(
            model.layers[layer].attention,
            *attention_inputs(model.layers[layer], streams[layer], ablated[layer], ()),
        )[:, head]  # (batch, 2n, 2n)
        for layer, head in receivers
    }
    patched, induction = {}, {}
    for path, names in PATHS.items():
        losses, weights = path_patched_losses(model, streams, ablated, repeated, receivers, names)
        # losses (2, 2n - 1); weights {receiver: (2, 2n, 2n)}
        patched[path], induction[path] = second_copy(losses), scores(weights)
    return {
        "clean": second_copy(ablated_token_losses(model, streams, repeated, [])),
        "ablated": second_copy(next_token_losses(model.unembed(ablated[-1]), repeated)),
        "patched": patched,
        "clean_induction": scores(clean_weights),
        "induction": induction,
    }
