"""
How many heads?
===============

At a fixed model width ``embed_dim`` (the paper's d_model), choosing the number of heads ``h``
only decides how the width is cut: ``head_dim = embed_dim // h``. This example measures what that
choice changes and what it does not:

* the parameter count and the matrix-multiplication FLOPs (they do not change),
* the element-wise work on the scores and the memory of the attention weights
  ``(batch, h, seq_len, seq_len)`` (they grow with ``h``),
* the time of one forward pass on the device this page was built on,
* the accuracy on the tiny two-relation task of the
  :ref:`previous example <sphx_glr_auto_examples_plot_05_what_heads_learn.py>`, over several
  seeds,

and puts the published result beside it: rows (A) of Table 3 of Vaswani et al. 2017. Finally it
looks at the other head count in modern models, the number of *key/value* heads (grouped-query
and multi-query attention).
"""

# %%
# Costs at fixed width
# --------------------
# We use the width of the tiny task, ``embed_dim = 16``, and count costs at a batch of 8
# sequences of 128 tokens, where the attention matrix is large enough to matter. Parameters are
# counted on real :class:`mha_ref.MultiHeadAttention` modules. FLOPs come from the analytic
# formula in :func:`mha_ref.tutorial.head_count.attention_flops` (a multiply-add counts as 2): the four
# projections and the two attention products are matrix multiplications whose size does not
# depend on ``h``; the softmax touches every one of the ``batch * h * seq_len**2`` scores. The
# weight memory is that tensor's size in float32.

import matplotlib.pyplot as plt
import torch

from mha_ref import GroupedQueryAttention, MultiHeadAttention, pick_device
from mha_ref.tutorial.bench import environment, time_fn
from mha_ref.tutorial.head_count import (
    attention_flops,
    attention_weight_bytes,
    head_count_sweep,
    plot_head_count_sweep,
    plot_relative_costs,
)
from mha_ref.tutorial.plotting import text_table

torch.manual_seed(0)
device = pick_device()

embed_dim, batch, seq_len = 16, 8, 128
head_counts = [1, 2, 4, 8]

costs = []
for h in head_counts:
    module = MultiHeadAttention(embed_dim, h, batch_first=True)
    flops = attention_flops(batch, seq_len, embed_dim, h)
    costs.append(
        {
            "h": h,
            "head_dim": embed_dim // h,
            "parameters": sum(p.numel() for p in module.parameters()),
            "matmul_mflops": (flops["total"] - flops["softmax"]) / 1e6,
            "softmax_mflops": flops["softmax"] / 1e6,
            "weight_mib": attention_weight_bytes(batch, seq_len, h) / 2**20,
        }
    )

cost_rows = [
    (
        c["h"],
        c["head_dim"],
        c["parameters"],
        f"{c['matmul_mflops']:.1f}",
        f"{c['softmax_mflops']:.1f}",
        f"{c['weight_mib']:.1f}",
    )
    for c in costs
]
print(
    text_table(
        ["h", "head_dim", "parameters", "matmul MFLOPs", "softmax MFLOPs", "weights MiB"], cost_rows
    )
)

# %%
# Time on this device
# -------------------
# The same modules, timed with :func:`mha_ref.tutorial.bench.time_fn`: three warm-up calls, then the median
# of ten, with a device synchronisation before each clock read on a GPU. The explicit path of
# ``MultiHeadAttention`` materialises the weights, so expect its time to grow with the weight
# tensor; the figure below shows what this device did. Times depend on the machine and differ
# from build to build, so they are printed on lines that start with ``[timing]`` and are never
# copied into this text. The environment comes first.

env = environment(device)
print(f"torch {env['torch']}, device: {env['device']}, threads: {env['threads']}")

x = torch.randn(batch, seq_len, embed_dim, device=device)  # (batch, seq_len, embed_dim)
seconds = []
for h in head_counts:
    module = MultiHeadAttention(embed_dim, h, batch_first=True).to(device).eval()
    with torch.no_grad():
        seconds.append(time_fn(lambda m=module: m(x, x, x), warmup=3, repeats=10, device=device))
for h, s in zip(head_counts, seconds, strict=True):
    print(f"[timing] h={h}: {s * 1e3:.2f} ms per forward pass")

fig = plot_relative_costs(
    head_counts,
    {
        "parameters": [c["parameters"] for c in costs],
        "matmul FLOPs": [c["matmul_mflops"] for c in costs],
        "softmax FLOPs": [c["softmax_mflops"] for c in costs],
        "attention-weight memory": [c["weight_mib"] for c in costs],
        f"time on this device: {env['device']}": seconds,
    },
    title=f"Cost at embed_dim={embed_dim}, batch={batch}, seq_len={seq_len}",
    xlabel="number of heads h",
    ylabel="relative to h = 1",
)
plt.show()

# %%
# Accuracy on the tiny task
# -------------------------
# Costs are half the story. :func:`mha_ref.tutorial.head_count.head_count_sweep` trains the two-relation
# model of the previous example with each head count and three seeds (initialisation and
# training data change with the seed; the evaluation set does not), all at ``embed_dim = 16``, so
# ``h = 8`` leaves each head only 2 dimensions for its queries and keys. The plot shows the mean
# with error bars of one standard deviation and every single seed as a dot.

rows = head_count_sweep(head_counts, embed_dim=embed_dim, seeds=(0, 1, 2))
accuracy_rows = [
    (
        row.num_heads,
        row.head_dim,
        "  ".join(f"{a:.3f}" for a in row.accuracies),
        f"{row.accuracy_mean:.3f}",
        f"{row.accuracy_std:.3f}",
    )
    for row in rows
]
print(text_table(["h", "head_dim", "accuracy per seed", "mean", "std"], accuracy_rows))
top_accuracy = max(row.accuracy_mean for row in rows)
top_heads = [row.num_heads for row in rows if row.accuracy_mean == top_accuracy]
print(f"best mean accuracy on this build: {top_accuracy:.3f} (h = {top_heads})")

# %%
# What the paper measured
# -----------------------
# Vaswani et al. 2017, "Attention Is All You Need" (arXiv:1706.03762), Table 3, rows (A), varies
# ``h`` while keeping the computation constant (``d_k = d_v = 512 / h``), and reports BLEU and
# perplexity (PPL) on the English-to-German development set newstest2013. The numbers below are
# copied from that table; everything derived from them is computed.
#
# A widely shared Chinese tutorial (one of this site's sources) claims that 8 heads beat a single
# head by "over 2 BLEU" on WMT 2014 EN-DE. The table does not support that: the measured
# difference is the gap printed below, on the dev set. It also shows the other side: with too
# many heads (so very small ``d_k``), quality drops again.

TABLE_3A = [
    {"h": 1, "d_k": 512, "d_v": 512, "bleu": 24.9, "ppl": 5.29},
    {"h": 4, "d_k": 128, "d_v": 128, "bleu": 25.5, "ppl": 5.00},
    {"h": 8, "d_k": 64, "d_v": 64, "bleu": 25.8, "ppl": 4.92},  # the base model
    {"h": 16, "d_k": 32, "d_v": 32, "bleu": 25.8, "ppl": 4.91},
    {"h": 32, "d_k": 16, "d_v": 16, "bleu": 25.4, "ppl": 5.01},
]
print("Vaswani et al. 2017, Table 3 (A), EN-DE newstest2013 (dev)")
paper_rows = [(r["h"], r["d_k"], r["d_v"], f"{r['bleu']:.1f}", f"{r['ppl']:.2f}") for r in TABLE_3A]
print(text_table(["h", "d_k", "d_v", "BLEU", "PPL"], paper_rows))

top_bleu = max(r["bleu"] for r in TABLE_3A)
by_heads = {r["h"]: r for r in TABLE_3A}
print(f"best BLEU: {top_bleu:.1f} (h = {[r['h'] for r in TABLE_3A if r['bleu'] == top_bleu]})")
print(f"h=1 is {top_bleu - by_heads[1]['bleu']:.1f} BLEU below the best (not 'over 2 BLEU')")
print(f"h=32 is {top_bleu - by_heads[32]['bleu']:.1f} BLEU below the best: too many heads hurt")

fig = plot_head_count_sweep(
    rows,
    TABLE_3A,
    heads_label="number of heads h",
    accuracy_label="accuracy (mean ± std)",
    seeds_label="one seed",
    accuracy_title=f"Tiny task, embed_dim={embed_dim} (this build)",
    bleu_label="BLEU, EN-DE newstest2013",
    bleu_title="Vaswani et al. 2017, Table 3 (A)",
    base_heads=8,
    base_label="base model (h = 8)",
)
plt.show()

# %%
# Heads for keys and values: MHA, GQA, MQA
# ----------------------------------------
# When a model generates text it keeps the keys and values of every past token (the KV cache).
# With ordinary multi-head attention (MHA) that is ``2 * h * head_dim = 2 * embed_dim`` numbers
# per token and layer. Grouped-query attention (GQA) lets a group of query heads share one
# key/value head; multi-query attention (MQA) shares a single one among all. The query heads, and
# so the attention-weight tensor, stay the same; the cache shrinks by ``h / num_kv_heads``.
#
# Below: the base model's shape (``embed_dim = 512``, ``h = 8``), with
# :class:`mha_ref.GroupedQueryAttention` computing the cache size per token. Bytes assume float16;
# the last column is the whole cache for a long context in a decoder of several layers (the
# sizes are printed first). With ``num_kv_heads = h`` the module has exactly the parameters of
# ordinary multi-head attention.

model_dim, num_heads, context_len, num_layers = 512, 8, 4096, 6
kv_variants = [("MHA", 8), ("GQA", 4), ("GQA", 2), ("MQA", 1)]
print(f"embed_dim={model_dim}, h={num_heads}, context={context_len} tokens, {num_layers} layers")
kv_rows = []
for name, kv_heads in kv_variants:
    gqa = GroupedQueryAttention(model_dim, num_heads, kv_heads)
    numbers = gqa.kv_cache_size_per_token()
    parameters = sum(p.numel() for p in gqa.parameters())
    mib = numbers * 2 * context_len * num_layers / 2**20
    kv_rows.append((name, kv_heads, parameters, numbers, numbers * 2, f"{mib:.1f}"))
print(
    text_table(
        [
            "variant",
            "kv heads",
            "parameters",
            "cache numbers/token/layer",
            "bytes (fp16)",
            "cache MiB",
        ],
        kv_rows,
    )
)
mha_parameters = sum(p.numel() for p in MultiHeadAttention(model_dim, num_heads).parameters())
print(f"MultiHeadAttention({model_dim}, {num_heads}) parameters, for comparison: {mha_parameters}")
