"""The tutorial's lab: what the gallery and the tests use beyond the attention reference.

Installed with ``pip install "mha-ref[tutorial]"`` (numpy, matplotlib and a CJK font package).
Nothing in ``mha_ref`` itself imports this sub-package. One module per topic:

``tasks``
    the lookup-table task (two relations at once) and the tiny model trained on it.
``training``
    seeded, deterministic training and its result (accuracy, loss curve, per-head weights).
``heads``
    where each head looks (offset profile, entropy); descriptive only.
``head_count``
    the cost of more heads at a fixed ``embed_dim``, and the head-count sweep.
``uptraining``
    multi-head -> grouped-query attention on the tiny model: mean-pooling, then uptraining.
``cache``
    the on-disk cache that lets the second language reuse the first one's trainings.
``plotting`` and ``fonts``
    attention-weight heatmaps, mask pictures, line plots; Chinese labels with a bundled font.
``bench`` and ``bench_suite``
    honest timing and memory helpers, and the comparison behind ``nox -s bench``.
"""
