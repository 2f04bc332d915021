"""The tutorial's lab: what the gallery and the tests use beyond the attention reference.

Installed with ``pip install "mha-ref[tutorial]"`` (numpy, matplotlib and a CJK font package).
Nothing in ``mha_ref`` itself imports this sub-package. One module per topic:

``tasks``
    the lookup-table task (two relations at once) and the tiny model trained on it.
``training``
    seeded, deterministic training and its result (accuracy, loss curve, per-head weights).
``heads``
    where each head looks (offset profile, entropy); descriptive only.
``ablation``
    what each head does: zero and mean ablation, gradient importance, confidence, pruning.
``head_count``
    the cost of more heads at a fixed ``embed_dim`` (tiny and realistic widths), the sweep.
``learning_curves``
    accuracy against training step per head count: speed to learn vs accuracy at convergence.
``induction``
    induction heads: a two-layer attention-only model, its head scores, ablation (Olsson 2022).
``induction_training``
    training that model (seeded, cached), with its loss curve's phase change.
``circuits``
    a head's output decomposed into its QK and OV matrices (Elhage 2021).
``low_rank``
    the low-rank bottleneck: how well one narrow head fits an attention pattern (Bhojanapalli
    2020).
``uptraining``
    multi-head -> grouped-query attention on the tiny model: mean-pooling, then uptraining.
``cache``
    the on-disk cache that lets the second language reuse the first one's trainings.
``sources``
    which files of ``mha_ref`` a module can run (its import closure): the cache's key, and the
    docs build's rule for which examples to run again.
``plotting`` and ``fonts``
    attention-weight heatmaps, mask pictures, line plots; Chinese labels with a bundled font.
``interactive``
    the exact weights a heatmap drew, attached to its figure, and the interactive view of
    them that the docs show beside each picture (and a notebook under it).
``bench`` and ``bench_suite``
    honest timing and memory helpers, and the comparison behind ``nox -s bench``.
"""
