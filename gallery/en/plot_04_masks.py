"""
Example 4: Masks
================

A mask tells attention which keys a query may use. Two masks cover most needs: a **causal**
mask (a token may not look at later tokens) and a **padding** mask (nobody may look at the
filler tokens that make sequences of a batch equally long). This example draws both, combines
them, and shows the traps that users report most:

* PyTorch's two attention APIs give a boolean mask **opposite meanings**;
* a float mask of zeros and ones masks **nothing**;
* a query whose keys are all masked gets different results from different APIs;
* when there are fewer queries than keys (decoding with a KV cache), "causal" has two
  alignments, and PyTorch's ``is_causal`` picks the one you usually do not want.

In ``mha_ref`` every mask builder uses one convention: ``True`` = may attend.
"""

# %%
# .. _ex04-a-padded-batch:
#
# A padded batch
# --------------
# Two sentences of different lengths, padded on the right to ``seq_len = 6`` tokens. Their
# embeddings are random; only the masks matter here. ``padding_mask(lengths)`` is ``True`` at
# the real tokens.

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from mha_ref import (
    MultiHeadAttention,
    allowed_to_additive,
    allowed_to_blocked,
    causal_mask,
    padding_mask,
    pick_device,
    scaled_dot_product_attention,
)
from mha_ref.tutorial.plotting import plot_heads, plot_masks, text_table

torch.manual_seed(0)
device = pick_device()

sentences = [
    ["Your", "journey", "starts", "right", "here", "<pad>"],
    ["One", "small", "step", "<pad>", "<pad>", "<pad>"],
]
lengths = torch.tensor([5, 3])  # real tokens per sentence
batch, seq_len, embed_dim, num_heads = 2, 6, 8, 2
x = torch.randn(batch, seq_len, embed_dim).to(device)  # (batch, seq_len, embed_dim)

is_real = padding_mask(lengths, max_len=seq_len).to(device)  # (batch, seq_len)
allowed_causal = causal_mask(seq_len, device=device)  # (seq_len, seq_len)
allowed_both = allowed_causal & is_real[:, None, :]  # (batch, seq_len, seq_len)
print("padding_mask:", tuple(is_real.shape), is_real.int().tolist())
print("causal_mask: ", tuple(allowed_causal.shape))
print("both:        ", tuple(allowed_both.shape))

# %%
# The three masks for the second sentence: rows are queries, columns are keys, blue cells may
# be attended to, light grey cells are blocked. The padding mask blocks the padded **keys**
# (columns); the padded queries (rows) still compute something, and that output is simply
# ignored later.

fig = plot_masks(
    [allowed_causal, is_real[1].expand(seq_len, seq_len), allowed_both[1]],
    sentences[1],
    titles=["causal", "padding", "causal & padding"],
    legend=("may attend", "blocked"),
    xlabel="key",
    ylabel="query",
)
plt.show()

# %%
# .. _ex04-what-the-masks-do-to-the-weights:
#
# What the masks do to the weights
# --------------------------------
# ``mha_ref.MultiHeadAttention`` takes masks the way ``torch.nn.MultiheadAttention`` does:
# ``attn_mask`` of shape ``(seq_len, seq_len)`` and ``key_padding_mask`` of shape
# ``(batch, seq_len)``, both with ``True`` = **blocked**, so our masks go through
# ``allowed_to_blocked`` first. The figure shows head 0 for the second sentence: the grey cells
# are the ones the mask blocks, their weight is exactly 0 (``plot_heads`` checks it), and every
# row still sums to 1.

mha = MultiHeadAttention(embed_dim, num_heads, batch_first=True).to(device).eval()
blocked_causal = allowed_to_blocked(allowed_causal)  # (seq_len, seq_len)
blocked_padding = allowed_to_blocked(is_real)  # (batch, seq_len)

with torch.no_grad():
    _, w_none = mha(x, x, x, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
    _, w_causal = mha(x, x, x, attn_mask=blocked_causal, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
    _, w_padding = mha(x, x, x, key_padding_mask=blocked_padding, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
    _, w_both = mha(x, x, x, attn_mask=blocked_causal, key_padding_mask=blocked_padding, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)

blocked_per_panel = torch.stack([  # (4, seq_len, seq_len), True = blocked
    torch.zeros_like(allowed_causal),  # no mask
    ~allowed_causal,  # causal
    ~is_real[1].expand(seq_len, seq_len),  # padding: the padding tokens' keys
    ~allowed_both[1],  # causal & padding
])
fig = plot_heads(
    torch.stack([w_none[1, 0], w_causal[1, 0], w_padding[1, 0], w_both[1, 0]]),  # (4, seq_len, seq_len)
    sentences[1],
    titles=["no mask", "causal", "padding", "causal & padding"],
    suptitle="Head 0 of the second sentence",
    ncols=2,
    colorbar_label="attention weight",
    xlabel="key",
    ylabel="query",
    blocked=blocked_per_panel,
    blocked_label="blocked by the mask (weight 0)",
)
plt.show()
print("largest weight on a blocked cell:", round(w_both[~allowed_both[:, None].expand_as(w_both)].max().item(), 4))
print("rows sum to 1:", torch.allclose(w_both.sum(-1), torch.ones(()), atol=1e-6))

# %%
# .. _ex04-one-mask-two-meanings:
#
# One mask, two meanings
# ----------------------
# ``torch.nn.functional.scaled_dot_product_attention`` reads a boolean mask as ``True`` = may
# attend. ``torch.nn.MultiheadAttention`` reads ``attn_mask`` and ``key_padding_mask`` as
# ``True`` = blocked. A float mask has no polarity: it is **added** to the scores, ``0`` keeps a
# key and ``-inf`` removes it, in both APIs. So we compute a reference with float masks
# (``allowed_to_additive``) and compare each API given a boolean mask of either polarity.
# Nothing raises an error when the polarity is wrong: the output is just different.

# sphinx_gallery_mha_ref_expected_nan
q, k, v = torch.randn(3, batch, num_heads, seq_len, embed_dim // num_heads).to(device)  # each (batch, num_heads, seq_len, head_dim)
allowed = allowed_both[:, None]  # (batch, 1, seq_len, seq_len), broadcasts over heads
torch_mha = mha.to_torch()
additive_causal = allowed_to_additive(allowed_causal)  # (seq_len, seq_len), 0 or -inf
additive_padding = allowed_to_additive(is_real)  # (batch, seq_len), 0 or -inf


def max_diff(a, b):
    return f"{(a - b).abs().max().item():.1e}"


with torch.no_grad():
    ref_sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed_to_additive(allowed))  # (batch, num_heads, seq_len, head_dim)
    ref_mha, _ = torch_mha(x, x, x, attn_mask=additive_causal, key_padding_mask=additive_padding)  # (batch, seq_len, embed_dim)
    rows = [
        ("F.scaled_dot_product_attention", "True = may attend",
         max_diff(F.scaled_dot_product_attention(q, k, v, attn_mask=allowed), ref_sdpa)),
        ("F.scaled_dot_product_attention", "True = blocked",
         max_diff(F.scaled_dot_product_attention(q, k, v, attn_mask=~allowed), ref_sdpa)),
        ("mha_ref.scaled_dot_product_attention", "True = may attend",
         max_diff(scaled_dot_product_attention(q, k, v, attn_mask=allowed), ref_sdpa)),
        ("mha_ref.scaled_dot_product_attention", "True = blocked",
         max_diff(scaled_dot_product_attention(q, k, v, attn_mask=~allowed), ref_sdpa)),
        ("torch.nn.MultiheadAttention", "True = blocked",
         max_diff(torch_mha(x, x, x, attn_mask=blocked_causal, key_padding_mask=blocked_padding)[0], ref_mha)),
        ("torch.nn.MultiheadAttention", "True = may attend",
         max_diff(torch_mha(x, x, x, attn_mask=allowed_causal, key_padding_mask=is_real)[0], ref_mha)),
        ("mha_ref.MultiHeadAttention", "True = blocked",
         max_diff(mha(x, x, x, attn_mask=blocked_causal, key_padding_mask=blocked_padding)[0], ref_mha)),
        ("mha_ref.MultiHeadAttention", "True = may attend",
         max_diff(mha(x, x, x, attn_mask=allowed_causal, key_padding_mask=is_real)[0], ref_mha)),
    ]

print(text_table(["API", "bool mask passed as", "max |out - float-mask out|"], rows))

# %%
# Each API is right with its own polarity (a difference at rounding level) and wrong with the
# other. A ``nan`` means that the wrong polarity left some query with no key at all: the next
# section is about that case.

# %%
# .. _ex04-a-float-mask-masks-nothing:
#
# A float mask of ones and zeros masks nothing
# --------------------------------------------
# ``allowed.float()`` looks like a mask, but as a float it is added to the scores: allowed
# keys get ``+1``, blocked keys ``+0``, and the blocked keys keep a sizeable weight. The
# additive mask from ``allowed_to_additive`` (``0`` / ``-inf``) gives them exactly 0.

with torch.no_grad():
    _, w_float01 = scaled_dot_product_attention(q, k, v, attn_mask=allowed.float(), return_weights=True)  # (batch, num_heads, seq_len, seq_len)
    _, w_additive = scaled_dot_product_attention(q, k, v, attn_mask=allowed_to_additive(allowed), return_weights=True)  # (batch, num_heads, seq_len, seq_len)
    torch_float01 = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed.float())  # (batch, num_heads, seq_len, head_dim)
    ours_float01 = scaled_dot_product_attention(q, k, v, attn_mask=allowed.float())  # (batch, num_heads, seq_len, head_dim)

blocked_cells = ~allowed.expand_as(w_float01)  # (batch, num_heads, seq_len, seq_len)
print("largest weight on a blocked key, float 0/1 mask:   ", round(w_float01[blocked_cells].max().item(), 4))
print("largest weight on a blocked key, 0/-inf float mask:", round(w_additive[blocked_cells].max().item(), 4))
print("PyTorch reads the 0/1 float mask the same way (max abs diff):", max_diff(torch_float01, ours_float01))

# %%
# .. _ex04-queries-with-no-key-left:
#
# Queries with no key left
# ------------------------
# Sequences are often padded on the **left** for generation. Combined with a causal mask, a
# padded query may only look at earlier keys, and all of them are padding: its row has no
# allowed key, and the softmax would divide 0 by 0. The table shows what each API returns for
# such rows, and whether all the other rows are still finite. The last three lines are the same
# PyTorch module, taking different internal paths.

left_real = is_real.flip(-1)  # (batch, seq_len), padding on the left
allowed_left = allowed_causal & left_real[:, None, :]  # (batch, seq_len, seq_len)
empty = ~allowed_left.any(dim=-1)  # (batch, seq_len), True where a query has no allowed key
print("second sentence, left-padded:", left_real[1].int().tolist())
print("queries with no allowed key: ", empty.int().tolist())


def describe(out):
    """What the rows without keys hold, and whether every other row is finite."""
    rows_empty, rows_other = out[empty], out[~empty]  # (num_empty, ...), (num_other, ...)
    if rows_empty.isnan().any():
        empty_text = "NaN"
    elif (rows_empty == 0).all():
        empty_text = "zeros"
    else:
        empty_text = "numbers"
    return empty_text, bool(rows_other.isfinite().all())


mask_sdpa = allowed_left[:, None]  # (batch, 1, seq_len, seq_len)
mha_kwargs = {"attn_mask": blocked_causal, "key_padding_mask": allowed_to_blocked(left_real)}
with torch.no_grad():
    results = [
        ("F.scaled_dot_product_attention", describe(F.scaled_dot_product_attention(q, k, v, attn_mask=mask_sdpa).transpose(1, 2))),
        ("mha_ref.scaled_dot_product_attention", describe(scaled_dot_product_attention(q, k, v, attn_mask=mask_sdpa).transpose(1, 2))),
        ("mha_ref.MultiHeadAttention", describe(mha(x, x, x, **mha_kwargs)[0])),
        ("torch.nn.MultiheadAttention, need_weights=True", describe(torch_mha(x, x, x, **mha_kwargs)[0])),
    ]
    with torch.inference_mode():
        results.append(("torch.nn.MultiheadAttention, inference_mode, need_weights=False",
                        describe(torch_mha(x, x, x, need_weights=False, **mha_kwargs)[0])))
with torch.enable_grad():
    results.append(("torch.nn.MultiheadAttention, autograd on, need_weights=False",
                    describe(torch_mha(x, x, x, need_weights=False, **mha_kwargs)[0].detach())))

print(text_table(["API", "rows with no key", "other rows finite"],
                 [(api, empty_text, finite) for api, (empty_text, finite) in results]))

# %%
# A NaN does not stay in its row for long: the next layer mixes rows, and a NaN loss stops
# training. ``mha_ref`` gives such a row zero weights (so the attention output is 0 and the
# module returns ``out_proj.bias`` there; a new module's bias is zero, hence "zeros" in the
# table). Better still, avoid empty rows: pad on the right, or let padded queries attend to
# themselves.
#
# .. _ex04-fewer-queries-than-keys-two-alignments:
#
# Fewer queries than keys: two alignments
# ---------------------------------------
# When a model generates text with a KV cache, it feeds only the newest tokens as queries
# while the keys hold the whole sequence so far. Here the last 2 of the 6 tokens are the
# queries. ``causal_mask(2, 6, alignment=...)`` offers two ways to lay the triangle:
#
# * ``"top_left"``: query 0 sees key 0 only, as if the queries were the *first* tokens. This is
#   what ``is_causal=True`` means in ``F.scaled_dot_product_attention``.
# * ``"bottom_right"``: the last query sees every key, as it should for the *last* tokens.

kv_tokens = ["Your", "journey", "starts", "with", "one", "step"]
num_new = 2
top_left = causal_mask(num_new, seq_len, alignment="top_left", device=device)  # (num_new, seq_len)
bottom_right = causal_mask(num_new, seq_len, alignment="bottom_right", device=device)  # (num_new, seq_len)

fig = plot_masks(
    [top_left, bottom_right],
    kv_tokens[-num_new:],
    kv_tokens,
    titles=['alignment="top_left"\n(is_causal=True of the SDPA function)', 'alignment="bottom_right"\n '],
    legend=("may attend", "blocked"),
    xlabel="key",
    ylabel="query",
)
plt.show()

# %%
# The right answer for the new tokens is what full causal attention over all 6 tokens gives
# for its last 2 rows. The bottom-right mask reproduces it; the top-left mask, and so
# PyTorch's ``is_causal=True``, does not.

with torch.no_grad():
    full = scaled_dot_product_attention(q, k, v, is_causal=True)  # (batch, num_heads, seq_len, head_dim)
    q_new = q[:, :, -num_new:]  # (batch, num_heads, num_new, head_dim)
    out_top_left = scaled_dot_product_attention(q_new, k, v, attn_mask=top_left)  # (batch, num_heads, num_new, head_dim)
    out_bottom_right = scaled_dot_product_attention(q_new, k, v, attn_mask=bottom_right)  # (batch, num_heads, num_new, head_dim)
    out_is_causal = F.scaled_dot_product_attention(q_new, k, v, is_causal=True)  # (batch, num_heads, num_new, head_dim)

print("bottom_right vs last rows of full causal attention:", max_diff(out_bottom_right, full[:, :, -num_new:]))
print("top_left     vs last rows of full causal attention:", max_diff(out_top_left, full[:, :, -num_new:]))
print("F.scaled_dot_product_attention(is_causal=True) vs top_left:", max_diff(out_is_causal, out_top_left))

# %%
# .. _ex04-exercises:
#
# Exercises
# ---------
# **Exercise 1.** The second sentence has 3 real tokens out of 6. Under the causal mask *and*
# the padding mask, how many keys may each of its 6 queries attend to?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Query ``i`` may see keys ``0 .. i`` (causal), and only the real ones among them (padding):
#    ``min(i + 1, 3)``. The padded queries still see the 3 real keys; their outputs are
#    simply ignored later. Counted from the mask:

print("second sentence, keys each query may attend to:", allowed_both[1].sum(dim=-1).tolist())

# %%
# **Exercise 2.** What happens if the padding mask goes to ``mha`` with the wrong polarity, as
# ``key_padding_mask=is_real`` (``True`` for the real tokens)? Does anything raise?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Nothing raises. ``nn.MultiheadAttention``'s convention is ``True`` = blocked, so now the real
#    tokens are blocked and every query of the second sentence attends only to padding:

with torch.no_grad():
    _, w_wrong = mha(x, x, x, key_padding_mask=is_real, average_attn_weights=False)  # (batch, num_heads, seq_len, seq_len)
real_keys = is_real[1]  # (seq_len,)
print(f"second sentence, total weight on real keys:    {w_wrong[1][..., real_keys].sum(-1).max().item():.3f}")
print(f"second sentence, total weight on padding keys: {w_wrong[1][..., ~real_keys].sum(-1).min().item():.3f}")

# %%
# **Exercise 3.** ``torch.ones(L, L, dtype=torch.bool).tril()`` and
# ``torch.ones(L, L, dtype=torch.bool).triu(1)``: which one is a causal mask for
# ``F.scaled_dot_product_attention``, and which for ``nn.MultiheadAttention``?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    ``tril()`` is ``True`` on and below the diagonal: the keys each query *may* see, the
#    convention of ``F.scaled_dot_product_attention`` (and ``mha_ref.causal_mask``).
#    ``triu(1)`` is ``True`` above the diagonal: the keys that are *blocked*, the convention of
#    ``nn.MultiheadAttention``. Each is the other's negation:

tril = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()  # (seq_len, seq_len)
triu1 = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)  # (seq_len, seq_len)
print("tril() equals causal_mask:                 ", torch.equal(tril, allowed_causal))
print("triu(1) equals allowed_to_blocked(causal): ", torch.equal(triu1, blocked_causal))
print("triu(1) equals ~tril():                    ", torch.equal(triu1, ~tril))

# %%
# .. _ex04-summary:
#
# Summary
# -------
# - ``mha_ref``'s mask builders, like the boolean masks of ``F.scaled_dot_product_attention``,
#   use ``True`` = may attend; ``attn_mask`` and ``key_padding_mask`` of
#   ``torch.nn.MultiheadAttention`` use ``True`` = blocked (``allowed_to_blocked`` converts). A
#   wrong polarity raises nothing: the output is just wrong.
# - A float mask is added to the scores: ``0`` keeps a key and ``-inf`` removes it. A float mask
#   of ones and zeros masks nothing.
# - A query with no key left (left padding under a causal mask) gets NaN from some of PyTorch's
#   paths; ``mha_ref`` gives it zero weights. Better still, avoid such rows.
# - With fewer queries than keys, as with a KV cache, the new tokens need the bottom-right causal
#   mask; ``is_causal=True`` in ``F.scaled_dot_product_attention`` is the top-left one.
