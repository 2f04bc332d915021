"""
Example 3: Why divide by sqrt(d_k)
==================================

Attention scores are dot products ``q . k`` of a query and a key with ``d_k`` features each.
Scaled dot-product attention divides them by sqrt(d_k) before the softmax. This example
measures what happens without that division as ``d_k`` grows: the scores spread out, the
softmax puts almost all the weight on one key, and its gradient shrinks towards zero, so the
scores stop learning. With the division, all three stay about the same for every ``d_k``.
"""

# %%
# .. _ex03-the-measurement:
#
# The measurement
# ---------------
# If the features of ``q`` and ``k`` are independent with mean 0 and variance 1, then
# ``q . k`` is a sum of ``d_k`` products, each with variance 1, so its variance is ``d_k``;
# dividing by sqrt(d_k) brings it back to 1. The queries and keys of a trained network need not
# have unit variance, but the point does not depend on it: with independent features of equal
# variance the variance of the sum is ``d_k`` times the variance of one product, whatever that
# is, and the division by sqrt(d_k) takes the factor ``d_k`` out.
#
# For each ``d_k`` we draw 1000 queries and, for each, ``seq_len = 16`` keys from a seeded
# generator (on the CPU, so that every device sees the same numbers), and compute the weights
# with ``mha_ref.scaled_dot_product_attention``: once with ``scale=1.0`` (no division) and
# once with the default scale ``1 / sqrt(d_k)``. We work in float64 so that the printed numbers
# do not depend on the device.
#
# For each query row we record:
#
# * the largest weight (``1 / seq_len`` when the weights are uniform, 1 when one key takes all);
# * the entropy of the weights (``log(seq_len)`` when uniform, 0 when one key takes all);
# * the size of the softmax gradient: the Jacobian of ``p = softmax(s)`` with respect to the
#   scores ``s`` is ``diag(p) - p p^T``, and we take its Frobenius norm. It tends to 0 when one
#   weight tends to 1.

import math

import matplotlib.pyplot as plt
import torch

from mha_ref import pick_device, scaled_dot_product_attention
from mha_ref.tutorial.plotting import plot_lines, text_table

torch.manual_seed(0)
device = pick_device()
generator = torch.Generator().manual_seed(0)

head_dims = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
num_queries, seq_len = 1000, 16


def softmax_stats(weights):
    """Largest weight, entropy and softmax-Jacobian norm of each row of (num_queries, seq_len)."""
    largest = weights.max(dim=-1).values  # (num_queries,)
    entropy = -(weights * weights.clamp_min(1e-300).log()).sum(dim=-1)  # (num_queries,)
    jacobian = torch.diag_embed(weights) - weights[:, :, None] * weights[:, None, :]  # (num_queries, seq_len, seq_len)
    grad_norm = jacobian.flatten(1).norm(dim=-1)  # (num_queries,)
    return largest.mean().item(), entropy.mean().item(), grad_norm.median().item()


results = {"var": [], "var_scaled": [], "largest": [], "largest_scaled": [],
           "entropy": [], "entropy_scaled": [], "grad": [], "grad_scaled": []}
for d_k in head_dims:
    q = torch.randn(num_queries, 1, d_k, generator=generator, dtype=torch.float64).to(device)  # (num_queries, 1, d_k)
    k = torch.randn(num_queries, seq_len, d_k, generator=generator, dtype=torch.float64).to(device)  # (num_queries, seq_len, d_k)
    v = torch.zeros(num_queries, seq_len, 1, dtype=torch.float64, device=device)  # (num_queries, seq_len, 1), unused
    scores = (q @ k.transpose(-2, -1)).squeeze(1)  # (num_queries, seq_len)
    results["var"].append(scores.var().item())
    results["var_scaled"].append((scores / math.sqrt(d_k)).var().item())
    for scale, suffix in ((1.0, ""), (None, "_scaled")):
        _, weights = scaled_dot_product_attention(q, k, v, scale=scale, return_weights=True)  # (num_queries, 1, seq_len)
        largest, entropy, grad = softmax_stats(weights.squeeze(1))
        results["largest" + suffix].append(largest)
        results["entropy" + suffix].append(entropy)
        results["grad" + suffix].append(grad)

table = [
    [d_k, f"{results['var'][i]:.1f}", f"{results['var_scaled'][i]:.3f}",
     f"{results['largest'][i]:.3f}", f"{results['largest_scaled'][i]:.3f}",
     f"{results['entropy'][i]:.3f}", f"{results['entropy_scaled'][i]:.3f}",
     f"{results['grad'][i]:.1e}", f"{results['grad_scaled'][i]:.1e}"]
    for i, d_k in enumerate(head_dims)
]
print(text_table(["d_k", "var q.k", "scaled", "top weight", "scaled", "entropy", "scaled", "grad", "scaled"], table))

# %%
# .. _ex03-the-scores-spread-out:
#
# The scores spread out
# ---------------------
# On log axes the variance of the raw scores lies on the line ``variance = d_k``; the scaled
# scores stay at variance 1 for every ``d_k``.

fig = plot_lines(
    head_dims,
    {
        "q . k (no scaling)": results["var"],
        "q . k / sqrt(d_k)": results["var_scaled"],
        "reference: d_k": head_dims,
    },
    styles={"reference: d_k": {"ls": "--", "marker": "", "color": "grey", "lw": 7, "alpha": 0.35, "zorder": 0}},
    xlabel="d_k (features per head, log scale)",
    ylabel="variance of the scores (log scale)",
    title="Unscaled score variance grows like d_k",
    logx=True,
    logy=True,
)
plt.show()

# %%
# .. _ex03-the-softmax-saturates:
#
# The softmax saturates
# ---------------------
# Scores with a large spread make the softmax close to a one-hot vector: without scaling the
# largest weight climbs towards 1 and the entropy falls towards 0 as ``d_k`` grows. With
# scaling both stay at the same level for every ``d_k``. The dashed lines mark uniform weights.

fig, (ax_top, ax_entropy) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
plot_lines(
    head_dims,
    {
        "no scaling": results["largest"],
        "divided by sqrt(d_k)": results["largest_scaled"],
        "uniform (1 / seq_len)": [1 / seq_len] * len(head_dims),
    },
    styles={"uniform (1 / seq_len)": {"ls": "--", "marker": "", "color": "grey"}},
    xlabel="d_k (features per head, log scale)",
    ylabel="largest weight in a row (mean)",
    title="Without scaling, one key takes almost all the weight",
    logx=True,
    ax=ax_top,
)
plot_lines(
    head_dims,
    {
        "no scaling": results["entropy"],
        "divided by sqrt(d_k)": results["entropy_scaled"],
        "uniform (log seq_len)": [math.log(seq_len)] * len(head_dims),
    },
    styles={"uniform (log seq_len)": {"ls": "--", "marker": "", "color": "grey"}},
    xlabel="d_k (features per head, log scale)",
    ylabel="entropy of a row (mean, nats)",
    title="Without scaling, the weights lose their spread",
    logx=True,
    ax=ax_entropy,
)
ax_top.set_ylim(0, 1.05)
ax_entropy.set_ylim(0, 1.15 * math.log(seq_len))
plt.show()

# %%
# .. _ex03-the-gradient-vanishes:
#
# The gradient vanishes
# ---------------------
# A saturated softmax passes almost no gradient back to the scores, so the queries and keys
# that produced them barely change in training. The plot shows the median over the queries of
# the Jacobian's norm (log scale): without scaling it falls by orders of magnitude once ``d_k``
# grows large; with scaling it stays flat.

fig = plot_lines(
    head_dims,
    {"no scaling": results["grad"], "divided by sqrt(d_k)": results["grad_scaled"]},
    xlabel="d_k (features per head, log scale)",
    ylabel="median Frobenius norm of d softmax / d s\n(log scale)",
    title="Without scaling, the softmax gradient vanishes",
    logx=True,
    logy=True,
)
plt.show()

# %%
# Multi-head attention splits ``embed_dim`` into heads of ``head_dim = embed_dim // num_heads``
# features, so each head's ``d_k`` is smaller than the model width. The division still matters:
# the effect above is already clear at ``d_k = 64``, the head size of the original Transformer. ``mha_ref.scaled_dot_product_attention``,
# ``mha_ref.MultiHeadAttention`` and PyTorch all divide by sqrt(head_dim) by default; the
# ``scale`` argument overrides it.

# %%
# .. _ex03-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Dividing by :math:`\sqrt{d_k}` assumes that the features of ``q`` and ``k``
# have variance 1. Suppose both have variance 4 instead (each feature twice as large). With
# ``d_k = 64``, what is the variance of ``q . k``, and what is it after the division?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Each product of two independent features now has variance 4 x 4 = 16, so the sum of
#    ``d_k`` of them has variance ``16 * d_k``, and after the division about 16, not 1. The
#    scale removes the dependence on ``d_k``, not on the size of the inputs. Measured on
#    ``num_queries`` samples, so only roughly:

d_k = 64
q4 = 2 * torch.randn(num_queries, d_k, generator=generator, dtype=torch.float64)  # (num_queries, d_k), variance 4
k4 = 2 * torch.randn(num_queries, d_k, generator=generator, dtype=torch.float64)  # (num_queries, d_k), variance 4
dots = (q4 * k4).sum(dim=-1)  # (num_queries,)
print(f"d_k={d_k}, variance 4: var(q.k) = {dots.var().item():.0f}, 16 * d_k = {16 * d_k}")
print(f"after dividing by sqrt(d_k): {(dots / math.sqrt(d_k)).var().item():.1f}")

# %%
# **Exercise 2.** ``scaled_dot_product_attention`` takes a ``scale`` argument. Which value gives
# the default (``scale=None``), and which one gives the unscaled scores of the "no scaling"
# curves above?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The scores are multiplied by ``scale``: the default is ``1 / sqrt(d_k)``, and ``scale=1.0``
#    leaves them unscaled (that is how the curves above were drawn). Checked against a softmax
#    written out by hand:

q1 = torch.randn(1, 4, d_k, generator=generator, dtype=torch.float64)  # (1, num_tokens, d_k)
k1 = torch.randn(1, 4, d_k, generator=generator, dtype=torch.float64)  # (1, num_tokens, d_k)
v1 = torch.randn(1, 4, d_k, generator=generator, dtype=torch.float64)  # (1, num_tokens, d_k)
for scale in (1 / math.sqrt(d_k), 1.0):
    by_hand = torch.softmax(q1 @ k1.transpose(-2, -1) * scale, dim=-1) @ v1  # (1, num_tokens, d_k)
    default = scaled_dot_product_attention(q1, k1, v1)  # (1, num_tokens, d_k)
    given = scaled_dot_product_attention(q1, k1, v1, scale=scale)  # (1, num_tokens, d_k)
    print(f"scale={scale:.3f}: equals the hand-written softmax: {torch.allclose(given, by_hand)}, "
          f"equals the default: {torch.allclose(given, default)}")

# %%
# .. _ex03-summary:
#
# Summary
# -------
# - With independent features of unit variance, the raw score ``q . k`` has variance ``d_k``;
#   dividing by sqrt(d_k) brings it back to 1, for every ``d_k``.
# - Without the division, the softmax gets closer to one-hot as ``d_k`` grows: the largest weight
#   climbs towards 1, the entropy falls towards 0, and the gradient the softmax passes back
#   falls by orders of magnitude. With it, all three stay level.
# - ``mha_ref`` and PyTorch divide by sqrt(head_dim) by default; ``scale`` overrides it.
