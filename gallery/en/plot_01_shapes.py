"""
Example 1: Shapes, step by step
===============================

Multi-head attention takes a batch of token vectors of shape ``(batch, seq_len, embed_dim)`` and
returns a tensor of the same shape. In between, the vectors are projected to queries, keys and
values, split into ``num_heads`` smaller heads that attend in parallel, and merged back.

This example follows one small batch through every step and prints each shape. Then it checks
that the handwritten steps, ``mha_ref.MultiHeadAttention``, ``torch.nn.MultiheadAttention`` and
the one-line ``F.scaled_dot_product_attention`` all compute the same numbers.

Notation: ``embed_dim`` is the paper's :math:`d_{model}`, ``num_heads`` is :math:`h`, and
``head_dim = embed_dim // num_heads`` is :math:`d_k` (:math:`= d_v`).
"""

# %%
# .. _ex01-setup:
#
# Setup
# -----
# A batch of 2 sequences, 5 tokens each, 64 features per token, 8 heads. The random input stands
# in for token embeddings. The computation runs on a GPU when there is one; every printed number
# is rounded so that it does not depend on the device.

import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from mha_ref import MultiHeadAttention, merge_heads, pick_device, split_heads
from mha_ref.tutorial.plotting import plot_heads

torch.manual_seed(0)
device = pick_device()

batch, seq_len, embed_dim, num_heads = 2, 5, 64, 8
head_dim = embed_dim // num_heads  # d_k = d_v
print(f"batch={batch}, seq_len={seq_len}, embed_dim={embed_dim}, num_heads={num_heads}")
print(f"head_dim = embed_dim // num_heads = {head_dim}")

x = torch.randn(batch, seq_len, embed_dim, device=device)  # (batch, seq_len, embed_dim)
print("x:", tuple(x.shape))

# %%
# .. _ex01-the-weights:
#
# The weights
# -----------
# We borrow the weights of a :class:`mha_ref.MultiHeadAttention`, so that the handwritten steps
# can be compared with the module at the end. Like ``torch.nn.MultiheadAttention``, it stores the
# three input projections packed in one matrix ``in_proj_weight`` of shape
# ``(3 * embed_dim, embed_dim)``: rows for Q, then K, then V. ``chunk(3)`` splits them.

mha = MultiHeadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()

W_q, W_k, W_v = mha.in_proj_weight.detach().chunk(3)  # each (embed_dim, embed_dim)
b_q, b_k, b_v = mha.in_proj_bias.detach().chunk(3)  # each (embed_dim,)
W_o = mha.out_proj.weight.detach()  # (embed_dim, embed_dim)
b_o = mha.out_proj.bias.detach()  # (embed_dim,)
print("in_proj_weight:", tuple(mha.in_proj_weight.shape))
print("W_q, W_k, W_v: ", tuple(W_q.shape), tuple(W_k.shape), tuple(W_v.shape))
print("W_o:           ", tuple(W_o.shape))

# %%
# .. _ex01-step-1-project-to-queries-keys-and-values:
#
# Step 1: project to queries, keys and values
# -------------------------------------------
# One matrix multiplication per projection computes the queries of all heads at once: the
# output still has ``embed_dim`` features, which are ``num_heads`` groups of ``head_dim``.

q = x @ W_q.T + b_q  # (batch, seq_len, embed_dim)
k = x @ W_k.T + b_k  # (batch, seq_len, embed_dim)
v = x @ W_v.T + b_v  # (batch, seq_len, embed_dim)
print("q, k, v:", tuple(q.shape), tuple(k.shape), tuple(v.shape))

# %%
# .. _ex01-step-2-split-the-heads:
#
# Step 2: split the heads
# -----------------------
# ``view`` cuts the last axis into ``(num_heads, head_dim)``; ``transpose`` moves the head axis
# next to the batch axis, so that one batched matrix multiplication serves every head.
# :func:`mha_ref.split_heads` does the same two steps.

q_heads = q.view(batch, seq_len, num_heads, head_dim).transpose(1, 2)  # (batch, num_heads, seq_len, head_dim)
k_heads = split_heads(k, num_heads)  # (batch, num_heads, seq_len, head_dim)
v_heads = split_heads(v, num_heads)  # (batch, num_heads, seq_len, head_dim)
print("q_heads:", tuple(q_heads.shape))
print("split_heads(q) equals view + transpose:", torch.equal(split_heads(q, num_heads), q_heads))

# %%
# .. _ex01-step-3-scores-and-weights:
#
# Step 3: scores and weights
# --------------------------
# Each head compares every query with every key: a ``(seq_len, seq_len)`` matrix per head,
# divided by sqrt(head_dim) (why: see
# :ref:`sphx_glr_auto_examples_plot_03_scaling.py`). A softmax over the keys turns
# each row into weights that are positive and sum to 1.

scores = q_heads @ k_heads.transpose(-2, -1) / math.sqrt(head_dim)  # (batch, num_heads, seq_len, seq_len)
weights = scores.softmax(dim=-1)  # (batch, num_heads, seq_len, seq_len)
row_sums = weights.sum(dim=-1)  # (batch, num_heads, seq_len)
print("scores: ", tuple(scores.shape))
print("weights:", tuple(weights.shape))
print("every weight >= 0:", bool((weights >= 0).all()))
row_error = (row_sums - 1).abs().max().item()
print(f"rows sum to 1: max |row_sum - 1| = {row_error:.1e}, below 1e-6: {row_error < 1e-6}")

# %%
# The figure shows the weights of the first sequence, one heatmap per head: row ``i`` says how
# much query position ``i`` takes from each key position. The weights of the projections are
# random here, so the differences between heads are noise; whether heads divide the work after
# training is what example 5 tests.

fig = plot_heads(
    weights[0],
    [f"pos {i}" for i in range(seq_len)],
    titles=[f"head {h}" for h in range(num_heads)],
    suptitle="Attention weights of sequence 0, per head",
    annotate=False,
    colorbar_label="attention weight",
    xlabel="key position",
    ylabel="query position",
)
plt.show()

# %%
# .. _ex01-step-4-weighted-sum-merge-output-projection:
#
# Step 4: weighted sum of the values, merge, output projection
# ------------------------------------------------------------
# Each head mixes its values with its weights. Then the heads are put side by side again
# (``transpose`` back, then ``reshape``, which copies because the transposed tensor is no longer
# contiguous), and the output projection ``W_o`` mixes the heads.

head_out = weights @ v_heads  # (batch, num_heads, seq_len, head_dim)
merged = head_out.transpose(1, 2).reshape(batch, seq_len, embed_dim)  # (batch, seq_len, embed_dim)
out = merged @ W_o.T + b_o  # (batch, seq_len, embed_dim)
print("head_out:", tuple(head_out.shape))
print("merged:  ", tuple(merged.shape))
print("merge_heads(head_out) equals transpose + reshape:", torch.equal(merge_heads(head_out), merged))
print("out:     ", tuple(out.shape), "same shape as x:", out.shape == x.shape)

# %%
# .. _ex01-same-numbers-four-ways:
#
# Same numbers, four ways
# -----------------------
# Now the same computation by the module, by PyTorch's module loaded with the same weights
# (the ``state_dict`` keys are the same), and by PyTorch's fused function applied to our
# heads. Float32 arithmetic in a different order differs in the last bits, so we print the
# largest absolute difference and whether it is below 1e-5.

with torch.no_grad():
    ours_out, ours_weights = mha(x, x, x, average_attn_weights=False)  # (batch, seq_len, embed_dim), (batch, num_heads, seq_len, seq_len)

    torch_mha = torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
    torch_mha.load_state_dict(mha.state_dict())
    torch_out, _ = torch_mha(x, x, x)  # (batch, seq_len, embed_dim)

    fused_heads = F.scaled_dot_product_attention(q_heads, k_heads, v_heads)  # (batch, num_heads, seq_len, head_dim)


def report(label, a, b):
    diff = (a - b).abs().max().item()
    print(f"{label}: max abs diff {diff:.1e}, below 1e-5: {diff < 1e-5}")


report("mha_ref.MultiHeadAttention vs steps", ours_out, out)
report("mha_ref weights vs step 3 weights", ours_weights, weights)
report("torch.nn.MultiheadAttention vs steps", torch_out, out)
report("F.scaled_dot_product_attention vs step 4 heads", fused_heads, head_out)

# %%
# .. _ex01-exercises:
#
# Exercises
# ---------
# The helper below runs the whole pipeline with another number of heads and prints the shapes.
# It also prints two costs. The parameter count does not depend on ``num_heads``. The number
# of attention weights, ``batch * num_heads * seq_len * seq_len``, grows with ``num_heads``: that
# is memory that multi-head attention pays for.


def trace_shapes(num_heads):
    head_dim = embed_dim // num_heads
    module = MultiHeadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
    W_q = module.in_proj_weight.detach().chunk(3)[0]  # (embed_dim, embed_dim)
    b_q = module.in_proj_bias.detach().chunk(3)[0]  # (embed_dim,)
    q_heads = split_heads(x @ W_q.T + b_q, num_heads)  # (batch, num_heads, seq_len, head_dim)
    with torch.no_grad():
        out, weights = module(x, x, x, average_attn_weights=False)  # (batch, seq_len, embed_dim), (batch, num_heads, seq_len, seq_len)
    params = sum(p.numel() for p in module.parameters())
    print(f"num_heads={num_heads}: head_dim={head_dim}")
    print("  q_heads:", tuple(q_heads.shape))
    print("  weights:", tuple(weights.shape), " one head's:", tuple(weights[0, 0].shape))
    print("  output: ", tuple(out.shape))
    print(f"  parameters: {params}, attention weights stored: {weights.numel()}")


# %%
# **Exercise 1.** Keep ``embed_dim = 64`` and go from 8 heads to 4. What is ``head_dim`` now?
# What are the shapes of ``q_heads`` and of the weights? Does the output shape change?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    ``head_dim = embed_dim // num_heads`` doubles, from 8 to 16. The head axis of ``q_heads`` and of the
#    weights halves, while each head's own ``(seq_len, seq_len)`` weight matrix keeps its shape.
#    The output keeps the shape ``(batch, seq_len, embed_dim)``: the number of heads changes how
#    the inside is cut, never the interface. The build prints the shapes below.

trace_shapes(8)
trace_shapes(4)

# %%
# **Exercise 2.** Two extremes: ``num_heads = 1`` (one head as wide as the model) and
# ``num_heads = embed_dim`` (every head is 1 feature wide). What do the shapes look like,
# and what does a head with ``head_dim = 1`` compute?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    With one head, ``q_heads`` has a head axis of size 1 and a single ``(seq_len, seq_len)``
#    weight matrix serves every feature. With ``num_heads = embed_dim``, each head's query and
#    key are single numbers and a score is their product: for a given query, the weights can
#    only rise (or only fall) with the key's one number, so such a head cannot pick a key in
#    the middle. Dividing by sqrt(1) scales nothing.
#    The parameter count is the same in both cases; the number of stored attention weights is
#    ``embed_dim`` times larger in the second. The build prints both below.

trace_shapes(1)
trace_shapes(embed_dim)

# %%
# **Exercise 3.** Can ``embed_dim = 64`` be cut into 6 heads? Predict what happens when the
# module is built, then open the answer.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    No: every head needs the same whole number of features, and 64 is not a multiple of 6.
#    The constructor refuses, with an error that names both arguments and lists head counts
#    that would work:

try:
    MultiHeadAttention(embed_dim, 6, batch_first=True)
except ValueError as error:
    print(f"{type(error).__name__}: {error}")

# %%
# .. _ex01-summary:
#
# Summary
# -------
# - Multi-head attention maps ``(batch, seq_len, embed_dim)`` to the same shape. On the way:
#   project to queries, keys and values; split them into ``(batch, num_heads, seq_len,
#   head_dim)``; score every query against every key, ``(batch, num_heads, seq_len, seq_len)``,
#   divided by sqrt(head_dim); softmax over the keys, so that every row sums to 1; weighted sum of
#   the values; merge the heads; output projection.
# - ``view`` and ``transpose`` split the heads; merging them back needs ``reshape``, which
#   copies, because the transposed tensor is no longer contiguous.
# - The handwritten steps, :class:`mha_ref.MultiHeadAttention`, ``torch.nn.MultiheadAttention``
#   with the same weights and ``F.scaled_dot_product_attention`` compute the same numbers, up to
#   float32 rounding.
