"""
Example 7: ``torch.nn.MultiheadAttention`` in practice
======================================================

PyTorch's multi-head attention module hides the steps of the earlier examples behind a handful
of arguments. This example goes through the ones that surprise people: the default
``(seq, batch, feature)`` layout, the weights it returns, how the three projections are packed
into one matrix, keys and values of other widths, and the two options that add keys
(``add_bias_kv``, ``add_zero_attn``). Each time it prints the shapes, and it checks the claims
against ``mha_ref.MultiHeadAttention``, which has the same interface and the same
``state_dict``, so weights move between the two.
"""

# %%
# .. _ex07-setup:
#
# Setup
# -----
# A small self-attention problem: 2 sequences of 4 tokens with 8 features, and 2 heads.

import matplotlib.pyplot as plt
import torch
from torch import nn

from mha_ref import (
    MultiHeadAttention,
    merge_heads,
    pick_device,
    scaled_dot_product_attention,
    split_heads,
)
from mha_ref.tutorial.plotting import plot_heads, text_table

torch.manual_seed(0)
device = pick_device()

batch, seq_len, embed_dim, num_heads = 2, 4, 8, 2
head_dim = embed_dim // num_heads
x = torch.randn(batch, seq_len, embed_dim).to(device)  # (batch, seq_len, embed_dim)

torch_mha = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
print("x:", tuple(x.shape))


def max_diff(a, b):
    return f"{(a - b).abs().max().item():.1e}"


# %%
# .. _ex07-batch-first:
#
# ``batch_first``
# ---------------
# By default (``batch_first=False``) the module expects ``(seq_len, batch, embed_dim)``, the
# layout of older RNN code. With ``batch_first=True`` it takes ``(batch, seq_len, embed_dim)``.
# The weights are the same; only the layout of inputs and outputs changes.

seq_first = nn.MultiheadAttention(embed_dim, num_heads).to(device).eval()  # batch_first=False
seq_first.load_state_dict(torch_mha.state_dict())
x_seq_first = x.transpose(0, 1)  # (seq_len, batch, embed_dim)

with torch.no_grad():
    out_bf, _ = torch_mha(x, x, x)  # (batch, seq_len, embed_dim)
    out_sf, _ = seq_first(x_seq_first, x_seq_first, x_seq_first)  # (seq_len, batch, embed_dim)

print("batch_first=True  in/out:", tuple(x.shape), tuple(out_bf.shape))
print("batch_first=False in/out:", tuple(x_seq_first.shape), tuple(out_sf.shape))
print("same numbers after transposing:", max_diff(out_sf.transpose(0, 1), out_bf))

# %%
# .. _ex07-need-weights-and-average-attn-weights:
#
# ``need_weights`` and ``average_attn_weights``
# ---------------------------------------------
# The module returns ``(attn_output, attn_weights)``. ``need_weights=False`` skips the weights
# (``None``), which lets PyTorch use its fused kernels. By default the weights are **averaged
# over the heads**: shape ``(batch, seq_len, seq_len)``. ``average_attn_weights=False`` keeps one
# matrix per head: ``(batch, num_heads, seq_len, seq_len)``.

with torch.no_grad():
    _, no_weights = torch_mha(x, x, x, need_weights=False)
    _, averaged = torch_mha(x, x, x)  # (batch, seq_len, seq_len)
    _, per_head = torch_mha(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)

print("need_weights=False:          ", no_weights)
print("default (averaged):          ", tuple(averaged.shape))
print("average_attn_weights=False:  ", tuple(per_head.shape))
print("mean of the heads == averaged:", max_diff(per_head.mean(dim=1), averaged))

# %%
# The per-head weights of the first sequence next to their average. Averaging mixes the heads:
# a pattern that only one head has is diluted in the average. With random weights and inputs of
# unit scale every row is close to uniform and there is little to dilute, so for this picture the
# input is multiplied by 4 (which multiplies every score by the square of that factor): the heads
# become sharp, and different from each other.

sharp = 4 * x  # (batch, seq_len, embed_dim)
with torch.no_grad():
    _, sharp_averaged = torch_mha(sharp, sharp, sharp)  # (batch, seq_len, seq_len)
    _, sharp_per_head = torch_mha(sharp, sharp, sharp, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)

fig = plot_heads(
    torch.cat([sharp_per_head[0], sharp_averaged[0:1]]),  # (num_heads + 1, seq_len, seq_len)
    [f"t{i}" for i in range(seq_len)],
    titles=[f"head {h}" for h in range(num_heads)] + ["average (default)"],
    colorbar_label="attention weight",
    xlabel="key",
    ylabel="query",
)
plt.show()

# %%
# .. _ex07-in-proj-weight:
#
# ``in_proj_weight``: three projections in one matrix
# ---------------------------------------------------
# There is no ``q_proj_weight`` in the parameter list when queries, keys and values have the
# same width: the three matrices are stacked in ``in_proj_weight``, shape
# ``(3 * embed_dim, embed_dim)``, rows ``[0, E)`` for Q, ``[E, 2E)`` for K and ``[2E, 3E)`` for V
# (likewise ``in_proj_bias``). Slicing them and redoing every step by hand gives the module's
# output.

print("parameters:", [(name, tuple(p.shape)) for name, p in torch_mha.named_parameters()])

W = torch_mha.in_proj_weight.detach()  # (3 * embed_dim, embed_dim)
b = torch_mha.in_proj_bias.detach()  # (3 * embed_dim,)
W_q, W_k, W_v = W[:embed_dim], W[embed_dim:2 * embed_dim], W[2 * embed_dim:]  # each (embed_dim, embed_dim)
b_q, b_k, b_v = b[:embed_dim], b[embed_dim:2 * embed_dim], b[2 * embed_dim:]  # each (embed_dim,)

with torch.no_grad():
    q = split_heads(x @ W_q.T + b_q, num_heads)  # (batch, num_heads, seq_len, head_dim)
    k = split_heads(x @ W_k.T + b_k, num_heads)  # (batch, num_heads, seq_len, head_dim)
    v = split_heads(x @ W_v.T + b_v, num_heads)  # (batch, num_heads, seq_len, head_dim)
    heads, weights = scaled_dot_product_attention(q, k, v, return_weights=True)  # (batch, num_heads, seq_len, head_dim), (batch, num_heads, seq_len, seq_len)
    out_by_hand = torch_mha.out_proj(merge_heads(heads))  # (batch, seq_len, embed_dim)

print("W_q, W_k, W_v:", tuple(W_q.shape), tuple(W_k.shape), tuple(W_v.shape))
print("output by hand vs module: ", max_diff(out_by_hand, out_bf))
print("weights by hand vs module:", max_diff(weights, per_head))

# %%
# .. _ex07-kdim-and-vdim:
#
# ``kdim`` and ``vdim``: keys and values of other widths
# ------------------------------------------------------
# In cross-attention the keys and values may come from another model with another width.
# ``kdim`` and ``vdim`` set their widths; the packed matrix can no longer hold three different
# shapes, so ``in_proj_weight`` is ``None`` and there are three separate matrices. The output
# has the query's shape, and the weights are ``(batch, query_len, key_len)``.

kdim, vdim, key_len = 5, 3, 7
cross = nn.MultiheadAttention(embed_dim, num_heads, kdim=kdim, vdim=vdim, batch_first=True).to(device).eval()
memory_k = torch.randn(batch, key_len, kdim).to(device)  # (batch, key_len, kdim)
memory_v = torch.randn(batch, key_len, vdim).to(device)  # (batch, key_len, vdim)

with torch.no_grad():
    out_cross, w_cross = cross(x, memory_k, memory_v)  # (batch, seq_len, embed_dim), (batch, seq_len, key_len)

print("in_proj_weight:", cross.in_proj_weight)
print("q_proj_weight:", tuple(cross.q_proj_weight.shape))
print("k_proj_weight:", tuple(cross.k_proj_weight.shape))
print("v_proj_weight:", tuple(cross.v_proj_weight.shape))
print("output:", tuple(out_cross.shape), " weights:", tuple(w_cross.shape))

# %%
# .. _ex07-add-bias-kv-and-add-zero-attn:
#
# ``add_bias_kv`` and ``add_zero_attn``: extra keys
# -------------------------------------------------
# ``add_bias_kv=True`` appends one learned key and value (``bias_k``, ``bias_v``) to every
# sequence; ``add_zero_attn=True`` appends one key and value of zeros (after the heads are
# split). Each adds a column to the weights: a query can put weight on "nothing in particular".
# A zero key gives the score 0, so it always receives some weight.

rows = []
for add_bias_kv in (False, True):
    for add_zero_attn in (False, True):
        module = nn.MultiheadAttention(embed_dim, num_heads, add_bias_kv=add_bias_kv,
                                       add_zero_attn=add_zero_attn, batch_first=True).to(device).eval()
        with torch.no_grad():
            _, w = module(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len + extra)
        extra = w.shape[-1] - seq_len
        on_extra = round(w[..., seq_len:].sum(dim=-1).mean().item(), 4) if extra else "-"
        rows.append((add_bias_kv, add_zero_attn, tuple(w.shape), extra, on_extra))

print("bias_k, bias_v:", tuple(module.bias_k.shape), tuple(module.bias_v.shape))
print(text_table(["add_bias_kv", "add_zero_attn", "weights shape", "extra keys",
                  "mean weight on extra keys"], rows))

# %%
# .. _ex07-from-pytorch-to-mha-ref-and-back:
#
# From PyTorch to ``mha_ref`` and back
# ------------------------------------
# ``mha_ref.MultiHeadAttention`` has the same constructor arguments and the same
# ``state_dict`` keys, so ``load_state_dict`` moves weights either way. ``from_torch`` and
# ``to_torch`` do the same in one call, configuration included. For each configuration the
# table compares outputs and per-head weights of torch and ``mha_ref``, and the output of the
# module converted back to torch.

configs = {
    "default": {},
    "kdim=5, vdim=3": {"kdim": kdim, "vdim": vdim},
    "add_bias_kv": {"add_bias_kv": True},
    "add_zero_attn": {"add_zero_attn": True},
    "no bias": {"bias": False},
}
ours = MultiHeadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
ours.load_state_dict(torch_mha.state_dict())
print("same state_dict keys:", list(ours.state_dict()) == list(torch_mha.state_dict()))

rows = []
for name, kwargs in configs.items():
    theirs = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True, **kwargs).to(device).eval()
    ours = MultiHeadAttention.from_torch(theirs)  # torch -> mha_ref
    back = ours.to_torch()  # mha_ref -> torch
    key, value = (memory_k, memory_v) if "kdim" in kwargs else (x, x)
    with torch.no_grad():
        out_t, w_t = theirs(x, key, value, average_attn_weights=False)  # (batch, seq_len, embed_dim), (batch, num_heads, seq_len, S)
        out_o, w_o = ours(x, key, value, average_attn_weights=False)  # (batch, seq_len, embed_dim), (batch, num_heads, seq_len, S)
        out_b, _ = back(x, key, value)  # (batch, seq_len, embed_dim)
    rows.append((name, max_diff(out_o, out_t), max_diff(w_o, w_t), max_diff(out_b, out_t)))

print(text_table(["configuration", "output: ours vs torch", "weights: ours vs torch",
                  "output: back to torch"], rows))

# %%
# .. _ex07-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Which rows of ``torch_mha.in_proj_weight`` hold the key projection of head 1
# (heads are numbered from 0)? Work it out from ``embed_dim`` and ``head_dim`` first.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The key block starts after the ``embed_dim`` query rows, and inside it head ``h`` owns
#    ``head_dim`` rows from ``h * head_dim``. Computing head 1's keys from those rows alone gives
#    head 1's slice of the full key projection:

h = 1
rows = slice(embed_dim + h * head_dim, embed_dim + (h + 1) * head_dim)
W, b = torch_mha.in_proj_weight.detach(), torch_mha.in_proj_bias.detach()
k_all = x @ W[embed_dim : 2 * embed_dim].T + b[embed_dim : 2 * embed_dim]  # (batch, seq_len, embed_dim)
k_head = x @ W[rows].T + b[rows]  # (batch, seq_len, head_dim)
print(f"head {h}'s key rows: {rows.start}:{rows.stop}")
print("equal to its slice of the key projection:", torch.allclose(k_head, k_all[..., h * head_dim : (h + 1) * head_dim], atol=1e-6))

# %%
# **Exercise 2.** With ``add_bias_kv=True`` *and* ``add_zero_attn=True``, what shape do the
# per-head weights of ``x`` have?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Each option adds one key (and value) to every sequence: the learned bias, then the zero
#    vector. So every query sees ``seq_len + 2`` keys:

both_extra = nn.MultiheadAttention(embed_dim, num_heads, add_bias_kv=True, add_zero_attn=True, batch_first=True).to(device).eval()
with torch.no_grad():
    _, w_extra = both_extra(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len + 2)
print("x:", tuple(x.shape), " per-head weights:", tuple(w_extra.shape))

# %%
# .. _ex07-summary:
#
# Summary
# -------
# - ``batch_first`` changes only the layout of inputs and outputs; the default is
#   ``(seq_len, batch, embed_dim)``.
# - The returned weights are averaged over the heads unless ``average_attn_weights=False``;
#   ``need_weights=False`` returns none and lets PyTorch use its fused kernels.
# - When queries, keys and values have one width, the three input projections are packed in
#   ``in_proj_weight`` (rows for Q, then K, then V); ``kdim`` and ``vdim`` give three separate
#   matrices instead.
# - ``add_bias_kv`` and ``add_zero_attn`` each add one key that every query can attend to.
# - :class:`mha_ref.MultiHeadAttention` has the same arguments and ``state_dict`` keys:
#   ``load_state_dict``, ``from_torch`` and ``to_torch`` move a module either way, and the table
#   compares its outputs and per-head weights with PyTorch's for each configuration.
