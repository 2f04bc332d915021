"""
Example 2: From one head to many
================================

A single causal attention head gives every token one set of attention weights over the tokens
before it. Multi-head attention runs several such heads side by side, each with its own
projections, and puts their outputs next to each other.

This example builds that up in three steps on a six-token sentence: one
``mha_ref.CausalAttention`` head, a ``mha_ref.MultiHeadAttentionWrapper`` that stacks heads,
and ``mha_ref.CausalMultiHeadAttention``, which computes all heads at once. Then it shows that
the wrapper and the batched module compute the same numbers when they hold the same weights.
"""

# %%
# .. _ex02-the-sentence:
#
# The sentence
# ------------
# Six tokens, each with a 3-dimensional embedding (small numbers chosen by hand, as in the
# textbook this example follows: S. Raschka, *Build a Large Language Model (From Scratch)*,
# chapter 3). Real batches hold several sequences, so the batch is two
# copies of the sentence: ``(batch, num_tokens, d_in)``.

import matplotlib.pyplot as plt
import torch

from mha_ref import (
    CausalAttention,
    CausalMultiHeadAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    allowed_to_blocked,
    causal_mask,
    pick_device,
    scaled_dot_product_attention,
    wrapper_to_batched,
)
from mha_ref.tutorial.plotting import plot_heads

torch.manual_seed(0)
device = pick_device()

tokens = ["Your", "journey", "starts", "with", "one", "step"]
inputs = torch.tensor(
    [
        [0.43, 0.15, 0.89],  # Your
        [0.55, 0.87, 0.66],  # journey
        [0.57, 0.85, 0.64],  # starts
        [0.22, 0.58, 0.33],  # with
        [0.77, 0.25, 0.10],  # one
        [0.05, 0.80, 0.55],  # step
    ]
)  # (num_tokens, d_in)
batch = torch.stack((inputs, inputs), dim=0).to(device)  # (batch, num_tokens, d_in)
d_in = inputs.shape[1]
context_length = batch.shape[1]
print("inputs:", tuple(inputs.shape))
print("batch: ", tuple(batch.shape))


def rounded(row):
    """A row of a tensor, each value rounded to 4 decimals (the same on every device)."""
    return "[" + ", ".join(f"{v:7.4f}" for v in row.tolist()) + "]"


# %%
# .. _ex02-one-causal-head:
#
# One causal head
# ---------------
# ``CausalAttention(d_in, d_out, context_length, dropout)`` projects each token to a query, a
# key and a value of ``d_out`` features, and lets each token attend only to itself and earlier
# tokens. Its output has ``d_out`` features per token.
#
# To see the weights, we recompute the head's attention from its own projections with
# ``mha_ref.scaled_dot_product_attention(..., is_causal=True, return_weights=True)`` and check
# that the output is the head's output.

torch.manual_seed(123)
d_out = 2
head = CausalAttention(d_in, d_out, context_length, 0.0).to(device)

with torch.no_grad():
    context_vec = head(batch)  # (batch, num_tokens, d_out)
    queries = head.W_query(batch)  # (batch, num_tokens, d_out)
    keys = head.W_key(batch)  # (batch, num_tokens, d_out)
    values = head.W_value(batch)  # (batch, num_tokens, d_out)
    recomputed, head_weights = scaled_dot_product_attention(
        queries, keys, values, is_causal=True, return_weights=True
    )  # (batch, num_tokens, d_out), (batch, num_tokens, num_tokens)

print("one head, output:", tuple(context_vec.shape))
print("weights:         ", tuple(head_weights.shape))
diff = (recomputed - context_vec).abs().max().item()
print(f"recomputed output vs head output: max abs diff {diff:.1e}, below 1e-6: {diff < 1e-6}")

# %%
# The causal weights: row ``i`` is the query token, column ``j`` the key token. The cells above
# the diagonal are grey: the causal mask blocks them (a token never looks ahead), so their weight
# is exactly 0 (``plot_heads`` checks it, and raises if a grey cell holds a weight). Every row
# sums to 1; the first token has no key but itself, so all of its weight is on itself.

# the same labels and mask for both heatmaps of causal weights below
causal_heatmap = dict(
    colorbar_label="attention weight",
    xlabel="key token",
    ylabel="query token",
    blocked=~causal_mask(context_length),  # (num_tokens, num_tokens), True = blocked
    blocked_label="blocked by the causal mask (weight 0)",
)
fig = plot_heads(
    head_weights[0],
    tokens,
    titles=[f"one causal head (d_out = {d_out})"],
    **causal_heatmap,
)
plt.show()

# %%
# .. _ex02-the-code-of-the-head:
#
# The code of the head
# --------------------
# Here is the code that just ran, printed from the installed package itself (so it cannot
# drift from what runs), its docstring left out (it is on the API page). The first line of
# ``forward`` checks the input and raises an error that names the argument. Then come the
# three projections, the scores, the causal mask (``masked_fill`` with ``-inf`` above the
# diagonal), the scaling by :math:`\sqrt{d_{out}}`, the softmax and the weighted sum of values.

import ast
import inspect
import textwrap


def source_of(obj):
    """The source code of a class or function as it runs, without its docstrings."""
    lines = textwrap.dedent(inspect.getsource(obj)).splitlines()
    docstrings = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and ast.get_docstring(node):
            first = node.body[0]
            docstrings.update(range(first.lineno - 1, first.end_lineno))
    return "\n".join(line for i, line in enumerate(lines) if i not in docstrings)


print(source_of(CausalAttention))

# %%
# .. _ex02-stacking-heads-the-wrapper:
#
# Stacking heads: the wrapper
# ---------------------------
# ``MultiHeadAttentionWrapper`` keeps a list of ``num_heads`` independent ``CausalAttention``
# heads and concatenates their outputs along the last axis. With ``d_out=2`` and two heads the
# output has ``num_heads * d_out`` features per token. Both sequences of the batch are the same
# sentence, so their outputs are the same.
#
# The seed is set right before the module is built, as in the textbook, so the random initial
# weights, and therefore the numbers below, are the textbook's.

torch.manual_seed(123)
wrapper = MultiHeadAttentionWrapper(d_in, d_out, context_length, 0.0, num_heads=2).to(device)

with torch.no_grad():
    context_vecs = wrapper(batch)  # (batch, num_tokens, num_heads * d_out)

print("wrapper output:", tuple(context_vecs.shape))
print("both sequences give the same output:", torch.equal(context_vecs[0], context_vecs[1]))
for token, row in zip(tokens, context_vecs[0], strict=True):
    print(rounded(row), token)

# %%
# The textbook prints its first and last rows. The check below compares them with the rows
# computed here, to 4 decimals. It raises an error if they differ, and then this page would
# not build: the rows you see above are the textbook's.

textbook_rows = torch.tensor(
    [
        [-0.4519, 0.2216, 0.4772, 0.1063],  # first row (Your)
        [-0.5299, -0.1081, 0.5077, 0.3493],  # last row (step)
    ]
)  # (2, num_heads * d_out)
torch.testing.assert_close(context_vecs[0, [0, -1]].cpu(), textbook_rows, rtol=0, atol=5e-5)
print("first and last rows equal the textbook's to 4 decimals")

# %%
# The wrapper's code is short: a ``nn.ModuleList`` of heads, and ``torch.cat`` along the last
# axis. There is no output projection here; the modules below add one.

print(source_of(MultiHeadAttentionWrapper))

# %%
# .. _ex02-two-meanings-of-d-out:
#
# Two meanings of ``d_out``
# -------------------------
# The same name means two different widths, a known source of confusion:
#
# * in ``CausalAttention`` and ``MultiHeadAttentionWrapper``, ``d_out`` is the width of **one
#   head**; the wrapper returns ``num_heads * d_out`` features;
# * in ``CausalMultiHeadAttention``, ``d_out`` is the **total** width of all heads together;
#   each head gets ``head_dim = d_out // num_heads`` features and the output has ``d_out``.
#
# So the textbook's batched module, built with ``d_out=2`` and two heads, has heads one
# feature wide and returns two features per token, not four:

torch.manual_seed(123)
batched_small = CausalMultiHeadAttention(d_in, d_out, context_length, 0.0, num_heads=2).to(device)

with torch.no_grad():
    small_out = batched_small(batch)  # (batch, num_tokens, d_out)

print(f"wrapper:  d_out={d_out} per head, {len(wrapper.heads)} heads -> output", tuple(context_vecs.shape))
print(f"batched:  d_out={batched_small.d_out} in total, head_dim={batched_small.head_dim} -> output", tuple(small_out.shape))
for token, row in zip(tokens, small_out[0], strict=True):
    print(rounded(row), token)

# %%
# .. _ex02-same-computation-batched:
#
# Same computation, batched
# -------------------------
# To compute what the wrapper computes, the batched module needs ``d_out = num_heads * 2`` in
# total. ``wrapper_to_batched`` builds it and copies the weights: it stacks the heads'
# projection matrices on top of each other, so head ``i`` owns slice ``i`` of the batched
# projection, and it sets the output projection to the identity (the wrapper has none). One
# matrix multiplication per projection now serves both heads.

batched = wrapper_to_batched(wrapper)

with torch.no_grad():
    batched_out = batched(batch)  # (batch, num_tokens, num_heads * d_out)

print("wrapper head 0 W_query.weight:", tuple(wrapper.heads[0].W_query.weight.shape))
print("batched W_query.weight:       ", tuple(batched.W_query.weight.shape))
print(f"batched d_out={batched.d_out}, num_heads={batched.num_heads}, head_dim={batched.head_dim}")
print("batched output:", tuple(batched_out.shape))
diff = (batched_out - context_vecs).abs().max().item()
print(f"batched vs wrapper: max abs diff {diff:.1e}, below 1e-6: {diff < 1e-6}")

# %%
# .. _ex02-the-pytorch-style-module-with-is-causal:
#
# The PyTorch-style module with ``is_causal``
# -------------------------------------------
# ``mha_ref.MultiHeadAttention`` has the constructor and ``forward`` of
# ``torch.nn.MultiheadAttention``, where the input width ``embed_dim`` is also the output
# width. Here ``embed_dim = 3`` (the embedding size), so three heads are one feature wide.
# ``is_causal=True`` is enough for it to build the causal mask. With
# ``average_attn_weights=False`` it returns one weight matrix per head: all three are
# lower-triangular.

torch.manual_seed(123)
mha = MultiHeadAttention(embed_dim=d_in, num_heads=3, batch_first=True).to(device).eval()

with torch.no_grad():
    mha_out, mha_weights = mha(batch, batch, batch, is_causal=True, average_attn_weights=False)  # (batch, num_tokens, embed_dim), (batch, num_heads, num_tokens, num_tokens)

print("output: ", tuple(mha_out.shape))
print("weights:", tuple(mha_weights.shape))
above_diagonal = mha_weights[..., ~causal_mask(context_length, device=device)]  # (batch, num_heads, num_blocked)
print("largest weight above the diagonal:", above_diagonal.abs().max().item())

fig = plot_heads(
    mha_weights[0],
    tokens,
    titles=[f"head {h}" for h in range(mha.num_heads)],
    suptitle="mha_ref.MultiHeadAttention, is_causal=True",
    **causal_heatmap,
)
plt.show()

# %%
# The three heads look almost alike. Each is one feature wide (``embed_dim = 3`` cut into three
# heads), and the six token vectors are close to one another: heads this narrow have little room
# to differ.
#
# ``torch.nn.MultiheadAttention`` treats ``is_causal`` only as a hint: it needs the mask itself
# in ``attn_mask``, in its own convention, where ``True`` means **blocked**.
# ``allowed_to_blocked`` flips ``causal_mask`` (``True`` = may attend) into that convention.
# ``to_torch`` copies our module, weights included, into PyTorch's.

torch_mha = mha.to_torch()
blocked = allowed_to_blocked(causal_mask(context_length, device=device))  # (num_tokens, num_tokens)

with torch.no_grad():
    torch_out, _ = torch_mha(batch, batch, batch, attn_mask=blocked, is_causal=True)  # (batch, num_tokens, embed_dim)

diff = (torch_out - mha_out).abs().max().item()
print(f"torch.nn.MultiheadAttention vs mha_ref: max abs diff {diff:.1e}, below 1e-6: {diff < 1e-6}")

# %%
# .. _ex02-multi-head-attention-from-scratch:
#
# Multi-head attention from scratch
# ---------------------------------
# Now the whole module in one screen, written with plain PyTorch. Four ``nn.Linear``
# projections (query, key, value, output); ``split_heads`` reshapes a projection into
# ``(batch, num_heads, seq_len, head_dim)``; one call of
# ``torch.nn.functional.scaled_dot_product_attention`` computes every head at once; the heads
# are merged back side by side and go through the output projection.

import torch.nn.functional as F
from torch import nn


class MultiHeadAttentionFromScratch(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide embed_dim={embed_dim} exactly")
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)  # W^Q of all heads, side by side
        self.k_proj = nn.Linear(embed_dim, embed_dim)  # W^K
        self.v_proj = nn.Linear(embed_dim, embed_dim)  # W^V
        self.out_proj = nn.Linear(embed_dim, embed_dim)  # W^O

    def split_heads(self, x):  # (batch, seq_len, embed_dim)
        batch, seq_len, _ = x.shape
        x = x.view(batch, seq_len, self.num_heads, self.head_dim)  # (batch, seq_len, num_heads, head_dim)
        return x.transpose(1, 2)  # (batch, num_heads, seq_len, head_dim)

    def forward(self, x, is_causal=False):  # x: (batch, seq_len, embed_dim)
        batch, seq_len, embed_dim = x.shape
        q = self.split_heads(self.q_proj(x))  # (batch, num_heads, seq_len, head_dim)
        k = self.split_heads(self.k_proj(x))  # (batch, num_heads, seq_len, head_dim)
        v = self.split_heads(self.v_proj(x))  # (batch, num_heads, seq_len, head_dim)
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)  # (batch, num_heads, seq_len, head_dim)
        merged = heads.transpose(1, 2).reshape(batch, seq_len, embed_dim)  # (batch, seq_len, num_heads * head_dim)
        return self.out_proj(merged)  # (batch, seq_len, embed_dim)


# %%
# Is it right? ``torch.nn.MultiheadAttention`` keeps the three input projections packed in one
# matrix ``in_proj_weight`` (query rows, then key rows, then value rows). Copy our weights into
# it, run both on the same random batch, with and without the causal mask, and compare.

torch.manual_seed(0)
embed_dim, num_heads, seq_len = 8, 2, 6
scratch = MultiHeadAttentionFromScratch(embed_dim, num_heads).to(device)
reference = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True).to(device)
with torch.no_grad():
    reference.in_proj_weight.copy_(torch.cat([scratch.q_proj.weight, scratch.k_proj.weight, scratch.v_proj.weight]))  # (3 * embed_dim, embed_dim)
    reference.in_proj_bias.copy_(torch.cat([scratch.q_proj.bias, scratch.k_proj.bias, scratch.v_proj.bias]))  # (3 * embed_dim,)
    reference.out_proj.load_state_dict(scratch.out_proj.state_dict())

x = torch.randn(2, seq_len, embed_dim, device=device)  # (batch, seq_len, embed_dim)
blocked = allowed_to_blocked(causal_mask(seq_len, device=device))  # (seq_len, seq_len), True = blocked
with torch.no_grad():
    ours = scratch(x)  # (batch, seq_len, embed_dim)
    theirs, _ = reference(x, x, x, need_weights=False)  # (batch, seq_len, embed_dim)
    ours_causal = scratch(x, is_causal=True)  # (batch, seq_len, embed_dim)
    theirs_causal, _ = reference(x, x, x, attn_mask=blocked, need_weights=False)  # (batch, seq_len, embed_dim)

print("output:", tuple(ours.shape), " head_dim:", scratch.head_dim)
for label, a, b in [("no mask", ours, theirs), ("causal ", ours_causal, theirs_causal)]:
    diff = (a - b).abs().max().item()
    print(f"{label}: from scratch vs torch.nn.MultiheadAttention: max abs diff {diff:.1e}, below 1e-6: {diff < 1e-6}")

# %%
# .. _ex02-exercises:
#
# Exercises
# ---------
# **Exercise 1.** A ``MultiHeadAttentionWrapper`` with three heads and ``d_out = 2``, and a
# ``CausalMultiHeadAttention`` with ``d_out = 6`` and three heads: what is the output width of
# each, and how wide is one head in each?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The wrapper's ``d_out`` is one head's width, so it returns ``num_heads * d_out``
#    features; the batched module's ``d_out`` is the total, split into ``d_out // num_heads``
#    per head. Here both come out the same width, with heads of the same size:

torch.manual_seed(123)
wrapper3 = MultiHeadAttentionWrapper(d_in, 2, context_length, 0.0, num_heads=3).to(device)
batched3 = CausalMultiHeadAttention(d_in, 6, context_length, 0.0, num_heads=3).to(device)
with torch.no_grad():
    print("wrapper, 3 heads of d_out=2:", tuple(wrapper3(batch).shape), " one head:", wrapper3.heads[0].d_out)
    print("batched, d_out=6, 3 heads:  ", tuple(batched3(batch).shape), " one head:", batched3.head_dim)

# %%
# **Exercise 2.** In ``forward`` above, what goes wrong if the merge skips the transpose and
# writes ``heads.reshape(batch, seq_len, embed_dim)``? Does the shape tell you?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The shape is the same, so no error is raised, but the numbers are not. ``heads`` is laid
#    out ``(batch, num_heads, seq_len, head_dim)``: without the transpose, ``reshape`` reads
#    it in that order and glues rows of one head, from different tokens, into one token's
#    vector. Only a comparison of values catches it:

with torch.no_grad():
    q = scratch.split_heads(scratch.q_proj(x))  # (batch, num_heads, seq_len, head_dim)
    k = scratch.split_heads(scratch.k_proj(x))  # (batch, num_heads, seq_len, head_dim)
    v = scratch.split_heads(scratch.v_proj(x))  # (batch, num_heads, seq_len, head_dim)
    heads = F.scaled_dot_product_attention(q, k, v)  # (batch, num_heads, seq_len, head_dim)
    wrong = scratch.out_proj(heads.reshape(len(x), seq_len, embed_dim))  # (batch, seq_len, embed_dim), rows mixed up
print("shape of the wrong output:", tuple(wrong.shape), " same as the right one:", wrong.shape == ours.shape)
print("equal to the right output:", torch.allclose(wrong, ours, atol=1e-6))

# %%
# **Exercise 3.** How many parameters does ``MultiHeadAttentionFromScratch(8, num_heads)``
# have with 1, 2, 4 and 8 heads? Work it out from the four ``nn.Linear`` layers first.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Each of the four projections is an ``embed_dim x embed_dim`` matrix plus a bias of
#    ``embed_dim``, whatever the number of heads: the heads only cut the same matrices into
#    slices. So the count is ``4 * (embed_dim**2 + embed_dim)`` every time:

for h in [1, 2, 4, 8]:
    module = MultiHeadAttentionFromScratch(embed_dim, h)
    print(f"num_heads={h}: head_dim={module.head_dim}, {sum(p.numel() for p in module.parameters())} parameters")
print("4 * (embed_dim**2 + embed_dim) =", 4 * (embed_dim**2 + embed_dim))

# %%
# .. _ex02-summary:
#
# Summary
# -------
# - A causal head gives every token weights over itself and the tokens before it: the weights
#   above the diagonal are exactly 0, and every row sums to 1.
# - ``MultiHeadAttentionWrapper`` runs independent heads and concatenates their outputs:
#   ``num_heads * d_out`` features per token, and no output projection.
# - ``d_out`` is one head's width in ``CausalAttention`` and the wrapper, but the width of all
#   heads together in ``CausalMultiHeadAttention``.
# - The batched module computes what the wrapper computes, with one matrix multiplication per
#   projection, once the heads' projection matrices are stacked.
# - ``torch.nn.MultiheadAttention`` needs the causal mask itself, with ``True`` = blocked; the
#   module written from scratch gives its outputs, with and without the mask.
