"""
Example 8: Common errors, reproduced
====================================

The mistakes people make most often with multi-head attention, each reproduced on this build:
the real error message (or, worse, the silent wrong result), then the fix running. Where
``mha_ref`` reports the same mistake differently from PyTorch, both messages are shown.

The errors are caught by the small helper ``expect_error`` below, which prints the exception
as Python would (long messages wrapped to the width of the page) and fails loudly if the code does **not** raise: every message on this page was
really raised when the page was built.
"""

# %%
# .. _ex08-setup:
#
# Setup
# -----
# The shapes of the first example: 2 sequences of 5 tokens, ``embed_dim = 64``, 8 heads.

import textwrap
import traceback
from contextlib import contextmanager

import matplotlib.pyplot as plt
import torch
from torch import nn

from mha_ref import (
    MultiHeadAttention,
    allowed_to_blocked,
    causal_mask,
    merge_heads,
    pick_device,
    scaled_dot_product_attention,
    split_heads,
)
from mha_ref.tutorial.plotting import plot_heads

torch.manual_seed(0)
device = pick_device()

batch, seq_len, embed_dim, num_heads = 2, 5, 64, 8
head_dim = embed_dim // num_heads
x = torch.randn(batch, seq_len, embed_dim).to(device)  # (batch, seq_len, embed_dim)


@contextmanager
def expect_error(*error_types):
    """Print the error raised inside the block, as Python would but wrapped; fail if none is."""
    try:
        yield
    except error_types as error:
        message = traceback.format_exception_only(error)[-1].strip()
        print(textwrap.fill(message, width=88, subsequent_indent="    ", break_long_words=False))
    else:
        raise AssertionError(f"expected {error_types}, but the code ran without an error")


def max_diff(a, b):
    return f"{(a - b).abs().max().item():.1e}"


# %%
# .. _ex08-1-embed-dim-not-divisible-by-num-heads:
#
# 1. ``embed_dim`` not divisible by ``num_heads``
# -----------------------------------------------
# Each head gets ``embed_dim // num_heads`` features, so the division must be exact. PyTorch
# stops with an ``AssertionError``:

with expect_error(AssertionError):
    nn.MultiheadAttention(embed_dim, num_heads=7)

# %%
# ``mha_ref`` raises a ``ValueError`` that names both arguments and lists the head counts
# that work:

with expect_error(ValueError):
    MultiHeadAttention(embed_dim, num_heads=7)

# %%
# The fix: pick a divisor of ``embed_dim``.

mha = MultiHeadAttention(embed_dim, num_heads=8, batch_first=True).to(device).eval()
print("num_heads=8 works: head_dim =", mha.head_dim)

# %%
# .. _ex08-2-forgetting-to-divide-by-sqrt-dk:
#
# 2. Forgetting to divide by sqrt(d_k)
# ------------------------------------
# Nothing raises: training just gets slow or unstable. With unit-variance queries and keys and
# ``d_k = 64`` (the original Transformer's head size), the unscaled softmax is already close to
# one-hot. ``scale=1.0`` turns the division off. (The example "Why divide by sqrt(d_k)" measures
# this for every ``d_k``.)

q, k, v = torch.randn(3, batch, num_heads, seq_len, 64).to(device)  # each (batch, num_heads, seq_len, d_k)
for label, scale in (("no scaling   ", 1.0), ("1 / sqrt(d_k)", None)):
    _, w = scaled_dot_product_attention(q, k, v, scale=scale, return_weights=True)  # (batch, num_heads, seq_len, seq_len)
    largest = w.max(dim=-1).values  # (batch, num_heads, seq_len)
    print(f"{label}: mean largest weight {largest.mean().item():.3f}, "
          f"rows with a weight > 0.99: {(largest > 0.99).float().mean().item():.0%}")

# %%
# .. _ex08-3-view-with-a-wrong-shape:
#
# 3. ``view`` with a wrong shape
# ------------------------------
# Splitting the heads with ``view`` needs ``batch * seq_len * num_heads * head_dim`` to equal
# the number of elements. A classic slip is passing ``embed_dim`` where ``head_dim`` belongs:

q = x  # (batch, seq_len, embed_dim), standing in for the projected queries
with expect_error(RuntimeError):
    q.view(batch, seq_len, num_heads, embed_dim)

# %%
# ``mha_ref.split_heads`` checks the one thing that can be wrong, the head count, and says
# which values would work:

with expect_error(ValueError):
    split_heads(q, 7)

# %%
# The fix: let ``view`` infer the last size with ``-1``, or call ``split_heads``.

q_heads = q.view(batch, seq_len, num_heads, -1).transpose(1, 2)  # (batch, num_heads, seq_len, head_dim)
print("view(..., -1):", tuple(q_heads.shape), " split_heads:", tuple(split_heads(q, num_heads).shape))

# %%
# .. _ex08-4-view-after-transpose:
#
# 4. ``view`` after ``transpose``
# -------------------------------
# Merging the heads reverses the split: ``transpose(1, 2)`` then ``view``. But ``transpose``
# only changes the strides, and ``view`` needs memory that is laid out in order:

head_out = scaled_dot_product_attention(q_heads, q_heads, q_heads)  # (batch, num_heads, seq_len, head_dim)
with expect_error(RuntimeError):
    head_out.transpose(1, 2).view(batch, seq_len, embed_dim)

# %%
# The fix: ``reshape`` (copies when needed), ``contiguous().view(...)``, or ``merge_heads``.

merged = head_out.transpose(1, 2).reshape(batch, seq_len, embed_dim)  # (batch, seq_len, embed_dim)
print("reshape:", tuple(merged.shape), " merge_heads equal:", torch.equal(merge_heads(head_out), merged))

# %%
# .. _ex08-5-batch-first-confusion:
#
# 5. ``batch_first`` confusion
# ----------------------------
# ``torch.nn.MultiheadAttention`` defaults to ``batch_first=False``: it reads
# ``(seq_len, batch, embed_dim)``. Given ``(batch, seq_len, embed_dim)`` it does **not**
# complain: it takes the 2 sequences for 2 tokens and the 5 tokens for 5 sequences, and returns
# a tensor of exactly the expected shape. Only the weights' shape gives it away.

seq_first = nn.MultiheadAttention(embed_dim, num_heads).to(device).eval()  # batch_first=False
right = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
right.load_state_dict(seq_first.state_dict())

with torch.no_grad():
    wrong_out, wrong_w = seq_first(x, x, x)  # x is (batch, seq_len, embed_dim): misread
    right_out, right_w = right(x, x, x)  # (batch, seq_len, embed_dim), (batch, seq_len, seq_len)

print("output shapes:  wrong", tuple(wrong_out.shape), " right", tuple(right_out.shape))
print("weights shapes: wrong", tuple(wrong_w.shape), " right", tuple(right_w.shape))
print("max abs difference of the outputs:", max_diff(wrong_out, right_out))

# %%
# ``mha_ref.MultiHeadAttention`` cannot guess the layout either: with the same defaults it
# computes the same wrong thing. The mistake surfaces once a ``key_padding_mask`` of shape
# ``(batch, seq_len)`` comes along. PyTorch then fails with:

ours_seq_first = MultiHeadAttention.from_torch(seq_first)
padding = torch.zeros(batch, seq_len, dtype=torch.bool, device=device)  # (batch, seq_len), nothing padded
with expect_error(AssertionError):
    seq_first(x, x, x, key_padding_mask=padding)

# %%
# and ``mha_ref`` with:

with expect_error(ValueError):
    ours_seq_first(x, x, x, key_padding_mask=padding)

# %%
# Read the shapes in either message: the module expected ``seq_len`` sequences, because it took the
# sequence axis for the batch axis; ``mha_ref``'s message says so and names the layout first. The
# fix: ``batch_first=True`` for
# ``(batch, seq_len, embed_dim)`` data, or transpose the input to ``(seq_len, batch, embed_dim)``.

with torch.no_grad():
    fixed_out, fixed_w = ours_seq_first(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))  # (seq_len, batch, embed_dim), (batch, seq_len, seq_len)
print("transposed input vs batch_first=True:", max_diff(fixed_out.transpose(0, 1), right_out))

# %%
# .. _ex08-6-averaged-weights-for-per-head-weights:
#
# 6. Averaged weights taken for per-head weights
# ----------------------------------------------
# By default the returned weights are the **mean over the heads**, ``(batch, seq_len, seq_len)``.
# Indexing ``weights[:, h]`` does not pick head ``h``: it picks query ``h``. And the heads
# cannot be recovered from the mean:

print("default weights:", tuple(right_w.shape), " weights[:, 0]:", tuple(right_w[:, 0].shape))
with expect_error(RuntimeError):
    right_w.view(batch, num_heads, seq_len, seq_len)

# %%
# The fix: ask for them with ``average_attn_weights=False``.

with torch.no_grad():
    _, per_head = right(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
print("per-head weights:", tuple(per_head.shape), " their mean is the default:", max_diff(per_head.mean(dim=1), right_w))

# %%
# .. _ex08-7-mask-polarity:
#
# 7. Mask polarity
# ----------------
# ``causal_mask`` (like ``F.scaled_dot_product_attention``) uses ``True`` = may attend;
# ``attn_mask`` of ``torch.nn.MultiheadAttention`` uses ``True`` = blocked. Passed as it is, the
# causal mask blocks each token from itself and everything before it. No error: the last token
# has no key left and PyTorch returns NaN for it. ``mha_ref`` gives that query weights of 0
# instead, so its attention output there is 0 and the module returns the output projection's
# bias (itself 0 in a new module). Every other row is wrong anyway.

allowed = causal_mask(seq_len, device=device)  # (seq_len, seq_len), True = may attend
ours_right = MultiHeadAttention.from_torch(right)
with torch.no_grad():
    torch_wrong, _ = right(x, x, x, attn_mask=allowed)  # (batch, seq_len, embed_dim)
    ours_wrong, _ = ours_right(x, x, x, attn_mask=allowed)  # (batch, seq_len, embed_dim)
    fixed, _ = right(x, x, x, attn_mask=allowed_to_blocked(allowed))  # (batch, seq_len, embed_dim)

print("query positions with NaN, torch:  ", torch_wrong.isnan().any(dim=-1)[0].nonzero().flatten().tolist())
print("query positions with NaN, mha_ref:", ours_wrong.isnan().any(dim=-1)[0].nonzero().flatten().tolist())
print("mha_ref at the last position minus out_proj.bias:", max_diff(ours_wrong[:, -1], ours_right.out_proj.bias))
print(f"mha_ref wrong vs right, first {seq_len - 1} positions:", max_diff(ours_wrong[:, :-1], fixed[:, :-1]))

# %%
# The weights show it. With the mask passed as it is, each query sees only the keys after it,
# and the last query sees none: PyTorch's weights in that row are NaN, drawn grey like the
# blocked cells.

with torch.no_grad():
    _, weights_wrong = right(x, x, x, attn_mask=allowed, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
    _, weights_fixed = right(x, x, x, attn_mask=allowed_to_blocked(allowed), average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)

fig = plot_heads(
    torch.stack([weights_wrong[0, 0], weights_fixed[0, 0]]),  # (2, seq_len, seq_len)
    titles=["wrong: True = may attend", "right: True = blocked"],
    suptitle="torch.nn.MultiheadAttention, head 0 of sequence 0",
    colorbar_label="attention weight",
    xlabel="key position",
    ylabel="query position",
    blocked=torch.stack([allowed, ~allowed]),  # (2, seq_len, seq_len): what each attn_mask blocks
    blocked_label="blocked (True in attn_mask)",
)
plt.show()

# %%
# The fix: ``allowed_to_blocked(mask)`` (that is, ``~mask``) before handing a mask to
# ``torch.nn.MultiheadAttention``; or ``is_causal=True`` with ``mha_ref.MultiHeadAttention``,
# which builds the right mask itself.

with torch.no_grad():
    ours_causal, _ = ours_right(x, x, x, is_causal=True)  # (batch, seq_len, embed_dim)
print("is_causal=True vs the fixed mask:", max_diff(ours_causal, fixed))
print("any NaN left:", bool(fixed.isnan().any()))

# %%
# .. _ex08-8-wrong-mask-dtype-or-shape:
#
# 8. Wrong mask dtype or shape
# ----------------------------
# Masks are ``bool`` or float, and their shapes are fixed. Three mistakes are common. First, an
# integer 0/1 mask, which ``torch.nn.MultiheadAttention`` refuses; ``mha_ref`` refuses it too,
# and says why:

blocked = allowed_to_blocked(allowed)  # (seq_len, seq_len), True = blocked
with expect_error(AssertionError):
    right(x, x, x, attn_mask=blocked.long())
with expect_error(TypeError):
    ours_right(x, x, x, attn_mask=blocked.long())

# %%
# Second, one mask per sequence, ``(batch, seq_len, seq_len)``. A 3-D ``attn_mask`` must have one
# mask per sequence *and head*, ``(batch * num_heads, seq_len, seq_len)``. PyTorch's message
# depends on the path the call takes: with autograd on it names the expected shape; in the
# inference fast path (under ``torch.no_grad()``) it does not.

per_sequence = blocked.expand(batch, seq_len, seq_len)  # (batch, seq_len, seq_len)
with expect_error(RuntimeError):
    right(x, x, x, attn_mask=per_sequence)
with expect_error(RuntimeError), torch.no_grad():
    right(x, x, x, attn_mask=per_sequence)
with expect_error(ValueError):
    ours_right(x, x, x, attn_mask=per_sequence)

# %%
# Third, and silent: a 0/1 *float* mask. Float masks are **added** to the scores, so the
# "blocked" keys get ``+1`` and more weight, not less. No error; the weights on the keys the
# mask was meant to block show it, next to the same weights with no mask at all:

with torch.no_grad():
    _, weights_float01 = right(x, x, x, attn_mask=blocked.float())  # (batch, seq_len, seq_len)
    _, weights_no_mask = right(x, x, x)  # (batch, seq_len, seq_len)
print(f"mean weight on the keys to block, no mask:       {weights_no_mask.masked_select(blocked).mean().item():.3f}")
print(f"mean weight on the keys to block, 0/1 float mask: {weights_float01.masked_select(blocked).mean().item():.3f}")
print(f"largest weight on a blocked key, 0/1 float mask: {weights_float01.masked_select(blocked).max().item():.2f}")

# %%
# The fixes: ``.bool()`` for integer and 0/1 float masks, and ``repeat_interleave(num_heads,
# dim=0)`` for a mask per sequence. Each now gives the causal result of section 7.

per_head = per_sequence.repeat_interleave(num_heads, dim=0)  # (batch * num_heads, seq_len, seq_len)
with torch.no_grad():
    from_long, _ = right(x, x, x, attn_mask=blocked.long().bool())  # (batch, seq_len, embed_dim)
    from_float, weights_bool = right(x, x, x, attn_mask=blocked.float().bool())  # (batch, seq_len, embed_dim)
    from_per_head, _ = right(x, x, x, attn_mask=per_head)  # (batch, seq_len, embed_dim)
print("integer mask .bool() vs section 7:", max_diff(from_long, fixed))
print("float mask .bool() vs section 7:  ", max_diff(from_float, fixed))
print("per-head 3-D mask vs section 7:   ", max_diff(from_per_head, fixed))
print(f"largest weight on a blocked key, bool mask: {weights_bool.masked_select(blocked).max().item():.2f}")

# %%
# .. _ex08-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Someone splits the heads with ``x.view(batch, num_heads, seq_len, head_dim)``.
# No error is raised. Is the result right?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    No. The element count matches, so ``view`` cannot complain, but it cuts the flat memory of
#    each sequence in the wrong order: a "head" gets whole tokens instead of one slice of every
#    token's features. The shape is right and the values are not:

wrong_split = x.view(batch, num_heads, seq_len, head_dim)  # right shape, wrong contents
right_split = split_heads(x, num_heads)  # (batch, num_heads, seq_len, head_dim)
print("same shape:", wrong_split.shape == right_split.shape, " same values:", torch.equal(wrong_split, right_split))

# %%
# **Exercise 2.** ``nn.MultiheadAttention(embed_dim, num_heads)``, with ``batch_first`` left at its
# default, gets ``x`` of shape ``(batch, seq_len, embed_dim)``. Which size does it take for the
# batch, and which for the sequence length? Predict the shape of the weights it returns.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    It reads ``x`` as ``(seq_len, batch, embed_dim)``: the batch size is taken as the sequence
#    length and the sequence length as the batch size. The weights, ``(batch, L, S)`` as the
#    module sees them, give it away:

default_layout = nn.MultiheadAttention(embed_dim, num_heads).to(device).eval()  # batch_first=False
with torch.no_grad():
    _, w_default = default_layout(x, x, x)  # (seq_len, batch, batch) in our names
print("x:", tuple(x.shape), "-> weights:", tuple(w_default.shape))

# %%
# .. _ex08-summary:
#
# Summary
# -------
# - Some mistakes raise: a head count that does not divide ``embed_dim``, ``view`` with a wrong
#   shape or after ``transpose``, an integer mask, a 3-D mask of the wrong shape. ``mha_ref``'s
#   messages name the argument and the fix.
# - Others raise nothing and give wrong numbers: no division by sqrt(d_k), ``batch_first``
#   confusion (until a ``key_padding_mask`` comes along), averaged weights indexed as if they
#   were per head, a mask of the wrong polarity, a 0/1 float mask.
# - So check the shapes of the outputs *and* of the weights, the mask convention of the API you
#   call, and the dtype of every mask.
