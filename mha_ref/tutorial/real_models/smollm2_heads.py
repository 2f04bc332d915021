r"""Examples 16 to 19's measurements on SmolLM2's 270 heads, each computed once and cached.

The tools they use (scores, ablation, attribution patching, the every-head views) are
:mod:`mha_ref.tutorial.real_models.heads`'s, written for any real model of this package; what is
here is SmolLM2's: the inputs (random repeated sequences and the shipped texts), the blocks and
heads examined, and the cached analyses:

* :func:`heads_analysis` (example 16): every head's four scores and the losses on each copy;
* :func:`interventions_analysis` (example 17): ablations of the top induction heads, the
  previous-token head, controls on other seeds, and every head's exact and estimated effect;
* :func:`sinks_analysis` (example 18): heads that share a key/value head, and the first-token
  heads ablated beside matched controls;
* :func:`icl_analysis` (example 19): the loss along long real texts and the in-context-learning
  score, with the induction heads ablated.

Each result is cached by the model file's SHA-256, the texts' SHA-256, its arguments and the code
that computes it (:mod:`mha_ref.tutorial.cache`), so the second language and the tests read it
back.
"""

from __future__ import annotations

import torch

from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.real_models.heads import (
    ABLATION_MODES,
    _second_copy_loss,
    ablate_heads,
    ablated_token_losses,
    attribution_effects,
    benjamini_hochberg,
    clean_streams,
    copy_losses,
    equal_groupings,
    exact_effects,
    group_similarities,
    grouping_gaps,
    head_means,
    head_outputs,
    head_scores,
    induction_scores,
    matched_controls,
    pattern_similarity,
    random_repeated_tokens,
    scale_heads,
    top_heads,
)
from mha_ref.tutorial.real_models.loading import model_threads
from mha_ref.tutorial.real_models.smollm2 import MODEL_FILE_SHA256, load_smollm2
from mha_ref.tutorial.real_models.texts import real_text, text_sha256

__all__ = [
    "heads_analysis",
    "icl_analysis",
    "icl_score",
    "icl_scores",
    "icl_windows",
    "interventions_analysis",
    "mean_and_standard_error",
    "sinks_analysis",
]


# ------------------------------------------------------------------------------------------------
# the measurements of examples 16 and 17, cached on disk (the second language reuses them)
# ------------------------------------------------------------------------------------------------

#: the random sequences of examples 16 and 17: 2 sequences of 50 tokens, each repeated
REPEATED = {"half_len": 50, "batch": 2, "seed": 0}
#: the short sequences of the exact sweep (cheap enough to rerun the model once per head)
SHORT_REPEATED = {"half_len": 20, "batch": 1, "seed": 1}
#: the blocks of the exact sweep: the top induction heads' blocks and the block before them
SWEEP_LAYERS = (16, 17, 18)
#: the factors by which example 17 scales the previous-token head's output (0: zero ablation)
SCALES = (0.99, 0.9, 0.75, 0.5, 0.25, 0.0)
#: other seeds of example 17's random sequences (same length and batch), for the key ablations
OTHER_SEEDS = (1, 2)


def _in_model_threads(compute, *args):
    """``compute(*args)`` as a function of no arguments that runs on the real model's threads.

    The result's ``func`` is ``compute``: the cache key follows it to the module that defines
    ``compute`` (:func:`mha_ref.tutorial.cache.compute_modules`), so that a computation of
    ``sink_values`` is keyed by that module's code, not by this one's alone.
    """

    def run():
        with model_threads():
            return compute(*args)

    run.func = compute  # as functools.partial names what it calls
    return run


def _arguments(**extra) -> dict:

    return {"model": MODEL_FILE_SHA256, "text": text_sha256("statements"), **extra}


def _inputs(model) -> tuple[torch.Tensor, torch.Tensor]:

    repeated = random_repeated_tokens(**REPEATED, vocab_size=model.config.vocab_size)
    return repeated, model.tokenizer.encode(real_text("statements"))  # (2, 100), (L,)


def heads_analysis() -> dict:
    """Example 16's measurements: every head's four scores and the loss on each copy.

    Returns:
        dict: ``"scores"`` (see :func:`~mha_ref.tutorial.real_models.heads.head_scores`),
        ``"copy_losses"`` ``(first, second)``,
        ``"text_loss"`` (mean loss on the shipped text ``"statements"``), ``"repeated"``
        ``(2, 100)`` and ``"text"`` ``(L,)``, the inputs. Cached by the model file's and the
        text's SHA-256 and the sequence's arguments (:mod:`mha_ref.tutorial.cache`).

    Raises:
        ModelFileError: the model file is missing or is not the pinned one (see
            :mod:`mha_ref.tutorial.real_models.smollm2` for the install command).
        ModuleNotFoundError: ``gguf`` or ``tokenizers`` is missing when the model is read
            (as :func:`mha_ref.tutorial.real_models.smollm2.load_smollm2`; the message gives the
            install command). Neither error is raised when the result is cached: with
            ``MHA_REF_CACHE_DIR`` naming a folder that holds the entry for these arguments,
            the result is read from it and the model is not loaded.

    Source:
        The scores of :func:`~mha_ref.tutorial.real_models.heads.head_scores` (Olsson et al. 2022,
        Sec. 2; Xiao et al. 2023, Sec. 3.1); the losses are the model's own next-token
        cross-entropy, in nats.
    """
    compute = _in_model_threads(_heads_analysis)
    return cached("smollm2_heads_analysis", _arguments(**REPEATED), compute)


def _heads_analysis() -> dict:
    model = load_smollm2("cpu")
    repeated, text = _inputs(model)
    with torch.no_grad():
        text_loss = float(model.token_losses(text).mean())
    return {
        "scores": head_scores(model, repeated, text),
        "copy_losses": copy_losses(model, repeated),
        "text_loss": text_loss,
        "repeated": repeated,
        "text": text,
    }


def interventions_analysis(num_controls: int = 3) -> dict:
    """Example 17's measurements: ablations of the top induction heads, of the previous-token
    head before them (with control heads of its block), and the sweep exact vs attribution.

    Args:
        num_controls: other heads of the previous-token head's block, drawn with seed 0, each
            ablated alone as a control.

    Returns:
        dict: ``"induction_heads"`` (the top 3), ``"single"`` and ``"together"``:
        ``{mode: ...}`` with ``(second_copy_loss, text_loss)`` per head / for the three;
        ``"clean"`` ``(second_copy_loss, text_loss)``; ``"previous_head"``, ``"controls"``,
        ``"feeding"``: per ablated head ``(second_copy_loss, induction scores of the top 3)``;
        ``"clean_induction"``; ``"exact"`` ``(len(SWEEP_LAYERS), heads)``, ``"attribution"``
        ``(layers, heads)``; ``"short_clean"``, the short sequence's copy losses;
        ``"scaling"`` ``{alpha: second-copy loss change}`` on the short sequence with the
        previous-token head's output times ``alpha`` (``SCALES``); ``"seeds"``
        ``{seed: {"clean", "single", "together", "previous"}}``, second-copy losses under zero
        ablation on the random sequences of the other seeds (``OTHER_SEEDS``).
    """
    arguments = _arguments(**REPEATED, short=SHORT_REPEATED, sweep=list(SWEEP_LAYERS),
                           controls=num_controls, scales=list(SCALES), seeds=list(OTHER_SEEDS))
    compute = _in_model_threads(_interventions, num_controls)
    return cached("smollm2_interventions", arguments, compute)


def _losses(model, inputs, heads=(), mode="zero", means=None) -> tuple[float, float]:
    """(second-copy loss, text loss) with ``heads`` ablated; ``inputs`` from :func:`_streamed`."""
    (repeated, repeated_streams), (text, text_streams) = inputs
    half_len = repeated.shape[1] // 2
    copy = ablated_token_losses(model, repeated_streams, repeated, heads, mode=mode, means=means)
    prose = ablated_token_losses(model, text_streams, text, heads, mode=mode, means=means)
    return float(copy[:, half_len:].mean()), float(prose.mean())


def _streamed(model, *token_sets):
    """Each ``(batch, seq_len)`` token set with its clean streams."""
    return [(tokens, clean_streams(model, tokens))
            for tokens in (model.check_tokens(t, min_len=2) for t in token_sets)]


def _interventions(num_controls: int) -> dict:
    model = load_smollm2("cpu")
    repeated, text = _inputs(model)
    scores = heads_analysis()["scores"]
    means = head_means(model, text)  # (layers, heads, head_dim), over the real text
    induction = top_heads(scores["induction"], 3)
    inputs = _streamed(model, repeated, text)  # an ablation reruns the blocks from its own
    single, together = {}, {}
    for mode in ABLATION_MODES:
        single[mode] = {head: _losses(model, inputs, [head], mode, means) for head in induction}
        together[mode] = _losses(model, inputs, induction, mode, means)
    # the strongest previous-token head in a block before every top induction head
    first_layer = min(layer for layer, _ in induction)
    earlier = scores["previous"].clone()
    earlier[first_layer:] = -1.0
    previous_head = top_heads(earlier, 1)[0]
    generator = torch.Generator().manual_seed(0)
    others = [h for h in range(model.config.num_heads) if h != previous_head[1]]
    picks = torch.randperm(len(others), generator=generator)[:num_controls].tolist()
    controls = [(previous_head[0], others[i]) for i in picks]
    feeding = {}
    for head in [previous_head, *controls]:
        with torch.no_grad(), ablate_heads(model, [head]):
            logits, weights = model(repeated, need_weights=True)  # (b, 2n, vocab), layers x ...
        second = float(_second_copy_loss(logits, repeated))
        half_len = REPEATED["half_len"]
        scores_after = [float(induction_scores(weights[b], half_len)[h]) for b, h in induction]
        feeding[head] = (second, scores_after)
    short = random_repeated_tokens(**SHORT_REPEATED, vocab_size=model.config.vocab_size)
    short_second = copy_losses(model, short)[1]
    scaling = {}
    for alpha in SCALES:
        with scale_heads(model, [previous_head], alpha):
            scaling[alpha] = copy_losses(model, short)[1] - short_second
    return {
        "scaling": scaling,
        "seeds": {seed: _seed_ablations(model, seed, induction, previous_head)
                  for seed in OTHER_SEEDS},
        "induction_heads": induction,
        "clean": _losses(model, inputs),
        "single": single,
        "together": together,
        "previous_head": previous_head,
        "controls": controls,
        "feeding": feeding,
        "clean_induction": [float(scores["induction"][block, h]) for block, h in induction],
        "exact": exact_effects(model, short, SWEEP_LAYERS),
        "attribution": attribution_effects(model, short),
        "short_clean": copy_losses(model, short),
    }


def _seed_ablations(model, seed: int, induction, previous_head) -> dict:
    """Second-copy losses, zero ablation, on the random sequences of another ``seed``."""
    repeated = random_repeated_tokens(REPEATED["half_len"], REPEATED["batch"], seed=seed,
                                      vocab_size=model.config.vocab_size)  # (2, 100)

    streams = clean_streams(model, repeated)  # an ablation reruns the blocks from its own

    def second(heads) -> float:
        losses = ablated_token_losses(model, streams, repeated, heads)  # (2, 2n - 1)
        return float(losses[:, REPEATED["half_len"]:].mean())

    return {
        "clean": second([]),
        "single": {head: second([head]) for head in induction},
        "together": second(induction),
        "previous": second([previous_head]),
    }


def sinks_analysis(num_ablated: int = 9, draws: int = 3, induction_max: float = 0.3) -> dict:
    """Example 18's measurements: pattern similarity within and across key/value groups, each
    head's output size, and the ablation of the strongest first-token heads beside controls.

    A head with a high first-token score on the real text can be an induction head on the
    repeated sequence (example 16's scores): ablating it would measure its copying, not its
    sink. So the *sink heads* ablated are the ``num_ablated`` heads with the highest
    first-token score among those whose induction score is at most ``induction_max``; the
    ``num_ablated`` heads with the highest first-token score regardless are ablated too, and
    the induction heads among them alone, to show where that set's cost comes from.

    Args:
        num_ablated: how many heads are ablated together.
        draws: random control sets of as many heads, drawn (seed 0) from the sink heads' blocks
            among the heads whose first-token score is at most 0.5 and whose induction score is
            at most ``induction_max``.
        induction_max: the highest induction score a sink head (or a control) may have.

    Returns:
        dict: ``"within"``, ``"across"`` ``(num_layers,)``, and ``"within_no_first"``,
        ``"across_no_first"``, the same with token 0 dropped from the keys and queries;
        ``"null_no_first"``: against every split of the heads into equal groups
        (:func:`~mha_ref.tutorial.real_models.heads.equal_groupings`), token 0 dropped,
        ``"groupings"`` (how many),
        ``"chance_more_alike"`` ``(num_layers,)`` (the share of splits more alike within than
        across), ``"p_value"`` ``(num_layers,)`` (the share at least as alike as the
        grouped-query split), ``"count_p_value"`` (the share of splits, each the same in
        every block, more alike within in at least as many blocks as the grouped-query split)
        and ``"fdr_blocks"`` (the blocks that
        :func:`~mha_ref.tutorial.real_models.heads.benjamini_hochberg` keeps at 5 %);
        ``"sinks"`` (the sink heads); ``"top_first"`` (the top first-token heads) and
        ``"top_first_induction"`` (those of them above ``induction_max``); ``"controls"``;
        ``"output_norm"`` ``(num_layers, num_heads)``, each head's mean output norm on the
        text; ``"clean"`` (real-text loss); ``"ablated"``, ``"top_first_ablated"``,
        ``"top_first_induction_ablated"`` ``{mode: loss}``; ``"control_losses"``
        ``{mode: [loss per draw]}``.
    """
    arguments = _arguments(**REPEATED, num_ablated=num_ablated, draws=draws,
                           induction_max=induction_max)
    compute = _in_model_threads(_sinks, num_ablated, draws, induction_max)
    return cached("smollm2_sinks", arguments, compute)


def _sinks(num_ablated: int, draws: int, induction_max: float) -> dict:
    model = load_smollm2("cpu")
    c = model.config
    _, text = _inputs(model)
    scores = heads_analysis()["scores"]
    with torch.no_grad():
        _, weights = model(text, need_weights=True)  # layers x (1, heads, L, L)
    similarities = {}
    for name, skip in (("", 0), ("_no_first", 1)):
        pairs = [group_similarities(pattern_similarity(w[0, :, skip:, skip:]), c.num_kv_heads)
                 for w in weights]  # layers x (within, across)
        similarities[f"within{name}"] = torch.tensor([p[0] for p in pairs])  # (layers,)
        similarities[f"across{name}"] = torch.tensor([p[1] for p in pairs])  # (layers,)
    # the null: every split of the heads into groups of the same size (the first is the true one)
    groupings = equal_groupings(c.num_heads, c.num_kv_heads)
    gaps = torch.stack([grouping_gaps(pattern_similarity(w[0, :, 1:, 1:]), groupings)
                        for w in weights])  # (layers, groupings), token 0 dropped
    counts = (gaps > 0).sum(dim=0)  # (groupings,) blocks where each split is more alike within
    p_values = (gaps >= gaps[:, :1]).double().mean(dim=1)  # (layers,), the true split included
    similarities["null_no_first"] = {
        "groupings": len(groupings),
        # how often a random split is more alike within than across, per block
        "chance_more_alike": (gaps > 0).double().mean(dim=1),  # (layers,)
        # the share of splits whose gap is at least the true split's (itself included)
        "p_value": p_values,
        # the same split in every block: the share of splits more alike in as many blocks
        "count_p_value": float((counts >= counts[0]).double().mean()),
        "fdr_blocks": benjamini_hochberg(p_values, 0.05),
    }
    outputs = head_outputs(model, text)  # (layers, 1, L, heads, head_dim)
    inductive = scores["induction"] > induction_max  # (layers, heads)
    top_first = top_heads(scores["first"], num_ablated)
    top_first_induction = [h for h in top_first if inductive[h]]
    sinks = top_heads(scores["first"].masked_fill(inductive, -1.0), num_ablated)
    blocks = sorted({layer for layer, _ in sinks})
    pool = [(b, h) for b in blocks for h in range(c.num_heads)
            if scores["first"][b, h] <= 0.5 and not inductive[b, h]]
    generator = torch.Generator().manual_seed(0)
    controls = [
        [pool[i] for i in torch.randperm(len(pool), generator=generator)[:num_ablated].tolist()]
        for _ in range(draws)
    ]
    means = head_means(model, text)  # (layers, heads, head_dim)

    def loss(heads, mode) -> float:
        with ablate_heads(model, heads, mode=mode, means=means):
            return float(model.token_losses(text).mean())

    with torch.no_grad():
        clean = float(model.token_losses(text).mean())
        ablated = {mode: loss(sinks, mode) for mode in ABLATION_MODES}
        top_ablated = {mode: loss(top_first, mode) for mode in ABLATION_MODES}
        top_induction_ablated = {mode: loss(top_first_induction, mode) for mode in ABLATION_MODES}
        control_losses = {mode: [loss(heads, mode) for heads in controls]
                          for mode in ABLATION_MODES}
    return {
        **similarities,
        "sinks": sinks,
        "top_first": top_first,
        "top_first_induction": top_first_induction,
        "controls": controls,
        "output_norm": outputs.norm(dim=-1).mean(dim=(1, 2)),  # (layers, heads)
        "clean": clean,
        "ablated": ablated,
        "top_first_ablated": top_ablated,
        "top_first_induction_ablated": top_induction_ablated,
        "control_losses": control_losses,
    }


# ------------------------------------------------------------------------------------------------
# example 19: loss against the position in a long real text, and in-context learning
# ------------------------------------------------------------------------------------------------

#: the texts example 19 reads: the four long sections of the Language Reference shipped with the
#: package (:data:`mha_ref.tutorial.real_models.texts.LONG_TEXTS`)
ICL_TEXTS = ("execution_model", "import_statement", "try_statement", "assignment_statements")
#: tokens per window, and the step between the starts of two windows of one text (so two
#: neighbouring windows share ``ICL_LEN - ICL_STRIDE`` tokens)
ICL_LEN = 512
#: how many windows example 19 runs through the model at once (memory, not the result)
ICL_WINDOWS_AT_ONCE = 4
ICL_STRIDE = 384
#: Olsson et al.'s in-context-learning score: loss late in the context minus loss early
#: (their tokens 500 and 50; here means over windows of positions, to average the noise: the
#: early window is centred on token 50, the late one ends after token 500)
EARLY = (40, 60)
LATE = (400, 511)


def icl_score(losses: torch.Tensor) -> float:
    """Mean loss at positions ``LATE`` minus mean loss at ``EARLY`` (negative: it learned).

    Args:
        losses: ``(batch, seq_len - 1)`` from ``model.token_losses``, entry ``t`` the loss of
            token ``t + 1``.

    Returns:
        float: nats per token.

    Source:
        Olsson et al. 2022, arXiv:2209.11895, Sec. 2 ("in-context learning score": the loss of
        the 500th token minus the loss of the 50th, averaged over examples).
    """
    late = losses[:, LATE[0] : LATE[1]].mean()
    early = losses[:, EARLY[0] : EARLY[1]].mean()
    return float(late - early)


def icl_scores(losses: torch.Tensor) -> torch.Tensor:
    """Each sequence's in-context-learning score: its mean loss at positions ``LATE`` minus
    its mean loss at ``EARLY`` (negative: the later tokens are predicted better).

    Their mean is :func:`icl_score` (the two windows have the same width in every row).

    Args:
        losses: ``(batch, seq_len - 1)`` float losses in nats from ``model.token_losses``,
            entry ``t`` the loss of token ``t + 1``; ``seq_len - 1 >= LATE[1]`` (511).

    Returns:
        torch.Tensor: ``(batch,)``, the dtype of ``losses``, nats per token.

    Raises:
        TypeError: if ``losses`` is not a floating-point tensor.
        ValueError: if ``losses`` is not 2-D or has fewer than ``LATE[1]`` positions.

    Source:
        Olsson et al. 2022, arXiv:2209.11895, Sec. 2 ("in-context learning score": the loss of
        the 500th token minus the loss of the 50th), one score per example.
    """
    if not isinstance(losses, torch.Tensor) or not losses.is_floating_point():
        raise TypeError(f"losses must be a floating-point torch.Tensor, got {_describe(losses)}.")
    if losses.dim() != 2 or losses.shape[1] < LATE[1]:
        raise ValueError(
            f"losses must have shape (batch, positions) with at least {LATE[1]} positions "
            f"(the late window ends there), got {tuple(losses.shape)}."
        )
    late = losses[:, LATE[0] : LATE[1]].mean(dim=1)  # (batch,)
    early = losses[:, EARLY[0] : EARLY[1]].mean(dim=1)  # (batch,)
    return late - early  # (batch,)


def mean_and_standard_error(values: torch.Tensor) -> tuple[float, float]:
    """The mean of ``values`` and its standard error, ``std / sqrt(n)`` with ``n - 1`` in the
    variance (the sample standard deviation).

    For a paired comparison, pass the per-item differences (``after - before``, one entry per
    window): the standard error of the mean difference, which removes what the items share.

    Args:
        values: ``(n,)`` floating-point, ``n >= 2``.

    Returns:
        tuple[float, float]: ``(mean, standard_error)``, in the unit of ``values``.

    Raises:
        TypeError: if ``values`` is not a floating-point tensor.
        ValueError: if ``values`` is not 1-D, has fewer than 2 entries, or holds a NaN or an
            infinity.

    Source:
        The standard error of a sample mean, ``s / sqrt(n)`` with ``s`` the sample standard
        deviation (Bessel's ``n - 1``, ``torch.std``'s default); for paired data, taken over the
        per-item differences, as in the paired t-test.
    """
    if not isinstance(values, torch.Tensor) or not values.is_floating_point():
        raise TypeError(f"values must be a floating-point torch.Tensor, got {_describe(values)}.")
    if values.dim() != 1 or values.numel() < 2:
        raise ValueError(
            f"values must have shape (n,) with n >= 2 (a standard error needs two values), "
            f"got {tuple(values.shape)}."
        )
    if not bool(torch.isfinite(values).all()):
        raise ValueError("values must be finite, got a NaN or an infinity.")
    values = values.double()  # (n,)
    return float(values.mean()), float(values.std() / values.numel() ** 0.5)


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of dtype {value.dtype}"
    return type(value).__name__


def icl_windows(tokens: torch.Tensor) -> list[int]:
    """Where example 19's windows start in one tokenised text: every ``ICL_STRIDE`` tokens,
    as long as a whole window of ``ICL_LEN`` tokens fits.

    Args:
        tokens: ``(seq_len,)`` token ids of one text.

    Returns:
        list[int]: the start positions, ``0, ICL_STRIDE, 2 * ICL_STRIDE, ...`` (empty if the
        text is shorter than ``ICL_LEN``).

    Raises:
        ValueError: if ``tokens`` is not 1-D.
    """
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1:
        shape = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(f"tokens must be a 1-D tensor (seq_len,), got {shape}.")
    return list(range(0, int(tokens.numel()) - ICL_LEN + 1, ICL_STRIDE))


def icl_analysis(threshold: float = 0.3, draws: int = 3) -> dict:
    """Example 19's measurements: per-position loss on windows of the long texts, clean, with
    the induction heads mean-ablated, and with matched control heads mean-ablated.

    Every text of ``ICL_TEXTS`` is cut into windows of ``ICL_LEN`` tokens starting every
    ``ICL_STRIDE`` tokens (:func:`icl_windows`); each window is read on its own, from its first
    token, so its positions count from 0.

    Args:
        threshold: the induction heads are those whose induction score is above this.
        draws: random control sets: as many heads per block as the induction heads, none of
            them an induction head, drawn with seed 0.

    Returns:
        dict: ``"induction_heads"``; ``"controls"`` (the sets); ``"windows"``, one
        ``(text name, start)`` per window; ``"tokens"`` ``(windows, ICL_LEN)``; ``"clean"``,
        ``"ablated"`` ``(windows, ICL_LEN - 1)`` float32 losses in nats (entry ``t`` the loss of
        token ``t + 1``) and ``"control_losses"``, one such tensor per draw. Cached by the model
        file's and the texts' SHA-256 and the arguments (:mod:`mha_ref.tutorial.cache`).

    Raises:
        ModelFileError, ModuleNotFoundError: as :func:`heads_analysis` (not when the result is
            cached).

    Source:
        Olsson et al. 2022, arXiv:2209.11895, Sec. 2 (the in-context-learning score) and the
        ablations of their Argument 3; the heads are ablated as
        :func:`~mha_ref.tutorial.real_models.heads.ablate_heads`, by their mean over the text
        ``"statements"`` (:func:`~mha_ref.tutorial.real_models.heads.head_means`).
    """

    arguments = _arguments(
        threshold=threshold, draws=draws, texts=[text_sha256(t) for t in ICL_TEXTS],
        length=ICL_LEN, stride=ICL_STRIDE,
    )
    return cached("smollm2_icl", arguments, _in_model_threads(_icl, threshold, draws))


def _icl(threshold: float, draws: int) -> dict:
    model = load_smollm2("cpu")
    _, reference = _inputs(model)
    windows, rows = [], []
    for name in ICL_TEXTS:
        text = model.tokenizer.encode(real_text(name))  # (L,)
        for start in icl_windows(text):
            windows.append((name, start))
            rows.append(text[start : start + ICL_LEN])  # (ICL_LEN,)
    tokens = torch.stack(rows)  # (windows, ICL_LEN)
    scores = heads_analysis()["scores"]
    chosen = [(int(l_), int(h)) for l_, h in (scores["induction"] > threshold).nonzero().tolist()]
    controls = matched_controls(chosen, model.config.num_heads, set(chosen), draws, seed=0)
    means = head_means(model, reference)  # (layers, heads, head_dim) over the short text
    # the ablated heads sit in the later blocks: each ablated run starts at its first ablated
    # block on the clean streams (the same losses, bit for bit, as a whole forward pass); a few
    # windows at a time, so that the streams and the logits fit a laptop's memory (all 20 at
    # once peaked at 7.4 GB)
    runs = [[], chosen, *controls]  # nothing ablated, the induction heads, the controls
    per_run: list[list[torch.Tensor]] = [[] for _ in runs]
    for part in tokens.split(ICL_WINDOWS_AT_ONCE):  # (<= ICL_WINDOWS_AT_ONCE, ICL_LEN)
        streams = clean_streams(model, part)  # num_layers + 1 x (part, ICL_LEN, embed_dim)
        for found, heads in zip(per_run, runs, strict=True):
            found.append(ablated_token_losses(model, streams, part, heads, mode="mean",
                                              means=means))  # (part, ICL_LEN - 1)
    clean, ablated, *control_losses = [torch.cat(found) for found in per_run]
    return {
        "induction_heads": chosen,
        "controls": controls,
        "windows": windows,
        "tokens": tokens,
        "clean": clean,
        "ablated": ablated,
        "control_losses": control_losses,
    }
