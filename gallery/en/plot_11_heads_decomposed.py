"""
Example 11: One head's output, decomposed: where a head looks is not what it writes
===================================================================================

Multi-head attention concatenates the heads' outputs and multiplies by :math:`W^O`
(Vaswani et al. 2017, `arXiv:1706.03762 <https://arxiv.org/abs/1706.03762>`_, section 3.2.2).
Elhage et al. (2021), "A Mathematical Framework for Transformer Circuits"
(`transformer-circuits.pub/2021/framework <https://transformer-circuits.pub/2021/framework/index.html>`_),
read the same product another way: split :math:`W^O` into one block of ``head_dim`` rows per
head, and the output becomes a **sum of independent terms, one per head**:

.. math::

    \\mathrm{MultiHead}(X) = \\sum_{h} \\big(A^h X W_V^h W_O^h + \\mathbf{1}\\, b_V^h W_O^h\\big) + b^O,
    \\qquad A^h = \\mathrm{softmax}\\Big(\\frac{(X W_Q^h + \\mathbf{1}\\, b_Q^h)
    (X W_K^h + \\mathbf{1}\\, b_K^h)^\\top}{\\sqrt{d_k}}\\Big).

Here :math:`\\mathbf{1}` is a column of ones and :math:`b_Q^h, b_K^h, b_V^h` are the head's
slices of the input-projection biases; because each row of :math:`A^h` sums to 1, the value bias
adds the same vector :math:`b_V^h W_O^h` at every position. The matrices below are the bias-free
parts: PyTorch (and :class:`mha_ref.MultiHeadAttention`) initialise every bias to zero, so on a
fresh module they are the whole head, while a trained module's biases add the terms above (the
sum checked below includes them).

Each head is then, apart from its biases, two matrices of size ``embed_dim x embed_dim``. The
**QK** matrix :math:`W_Q^h {W_K^h}^\\top` sets the attention pattern :math:`A^h`: *where the head
looks*. The **OV** matrix :math:`W_V^h W_O^h` sets *what it writes* from the tokens it looks at. This page
checks the sum on a real module, measures the rank of both matrices, and then separates the two
halves of a head by experiment.
"""

# %%
# .. _ex11-the-output-is-a-sum-over-heads:
#
# The output is a sum over heads
# ------------------------------
# We build a seeded :class:`mha_ref.MultiHeadAttention` with ``embed_dim=8`` and ``num_heads=2``
# (so ``head_dim=4``), in float64 so that only rounding separates the two computations.
# :func:`~mha_ref.tutorial.circuits.head_outputs` computes each head's term, its context times
# its own rows of :math:`W^O`, step by step from the module's parameters. Adding the terms and
# the output bias must give the module's output.

import matplotlib.pyplot as plt
import torch

from mha_ref import MultiHeadAttention, causal_mask
from mha_ref.tutorial.circuits import (
    argmax_copying_fraction,
    composition_scores,
    copy_qk,
    eigenvalue_copying_score,
    head_contexts,
    head_outputs,
    ov_matrix,
    plot_matrices,
    qk_matrix,
    random_composition_baseline,
    rank,
    token_ov_circuit,
)
from mha_ref.tutorial.induction import (
    composition_ablation,
    corrupt_first_copy,
    head_scores,
    patched_logits,
)
from mha_ref.tutorial.induction_training import train_induction
from mha_ref.tutorial.plotting import plot_heads, text_table

torch.manual_seed(0)
module = MultiHeadAttention(embed_dim=8, num_heads=2, batch_first=True).double().eval()
x = torch.randn(1, 5, 8, dtype=torch.float64)  # (batch, seq_len, embed_dim)
blocked = ~causal_mask(5)  # (seq_len, seq_len), True = blocked

with torch.no_grad():
    output, _ = module(x, x, x, attn_mask=blocked)  # (batch, seq_len, embed_dim)
    terms = head_outputs(module, x, x, x, blocked)  # (batch, num_heads, seq_len, embed_dim)
    summed = terms.sum(dim=1) + module.out_proj.bias  # (batch, seq_len, embed_dim)
print("module output:", tuple(output.shape))
print("one term per head:", tuple(terms.shape))
print(f"max |sum of head terms + bias - module output|: {(summed - output).abs().max():.1e}")

# %%
# .. _ex11-each-head-qk-and-ov-matrices:
#
# Each head's QK and OV matrices, and their rank
# ----------------------------------------------
# Both matrices are ``embed_dim x embed_dim``, but each is a product through the head's
# ``head_dim`` columns, so its rank is at most ``head_dim``. A head can only look along, and write
# into, a ``head_dim``-dimensional part of the ``embed_dim``-dimensional space. The ranks below are
# computed in float64 by :func:`~mha_ref.tutorial.circuits.rank`.

with torch.no_grad():
    qk = [qk_matrix(module, h) for h in range(2)]  # each (embed_dim, embed_dim)
    ov = [ov_matrix(module, h) for h in range(2)]  # each (embed_dim, embed_dim)
print(f"embed_dim: {module.embed_dim}, head_dim: {module.head_dim}")
rows = [[f"head {h}", tuple(qk[h].shape), rank(qk[h]), rank(ov[h])] for h in range(2)]
print(text_table(["head", "shape", "rank of QK", "rank of OV"], rows))

fig = plot_matrices(
    qk + ov,
    ["head 0: QK", "head 1: QK", "head 0: OV", "head 1: OV"],
    suptitle="The two matrices of each head (seeded module)",
    ncols=2,
)
plt.show()

# %%
# .. _ex11-same-attention-pattern-different-output:
#
# Same attention pattern, different output
# ----------------------------------------
# If QK and OV are separate, a head's attention pattern cannot tell us what it writes. We test
# that directly: :func:`~mha_ref.tutorial.circuits.copy_qk` gives head 1 the query and key
# parameters of head 0 and leaves head 1's value and output parameters alone. Then the two heads
# have the same QK matrix, hence the same attention weights on every input, but different OV
# matrices. What to look for: the two heatmaps below are the same picture, while the heads'
# terms in the output are not the same vectors.

copy_qk(module, source=0, target=1)
with torch.no_grad():
    _, weights = head_contexts(module, x, x, x, blocked)  # (batch, num_heads, seq_len, seq_len)
    terms = head_outputs(module, x, x, x, blocked)  # (batch, num_heads, seq_len, embed_dim)
    same_qk = (qk_matrix(module, 0) - qk_matrix(module, 1)).abs().max()
    ov_gap = (ov_matrix(module, 0) - ov_matrix(module, 1)).abs().max()
print(f"max |QK of head 0 - QK of head 1|: {same_qk:.1e}")
print(f"max |weights of head 0 - weights of head 1|: {(weights[0, 0] - weights[0, 1]).abs().max():.1e}")
print(f"max |OV of head 0 - OV of head 1|: {ov_gap:.3f}")
print(f"max |term of head 0 - term of head 1|: {(terms[0, 0] - terms[0, 1]).abs().max():.3f}")

fig = plot_heads(
    weights[0],
    titles=["head 0", "head 1 (QK copied from head 0)"],
    suptitle="Same QK, same attention weights",
    colorbar_label="attention weight",
    xlabel="key position",
    ylabel="query position",
    blocked=blocked,
    blocked_label="blocked by the causal mask (weight 0)",
)
plt.show()

# %%
# .. _ex11-the-heads-of-the-induction-model:
#
# The heads of the induction model
# --------------------------------
# The converse: do heads that look in different places write different things? We take the two-layer model trained in
# :ref:`Example 10 <sphx_glr_auto_examples_plot_10_induction_heads.py>` (read
# from the cache when that example ran first) and read each head's OV matrix from tokens to
# logits, :math:`W_E W_V^h W_O^h W_U^\top` (:func:`~mha_ref.tutorial.circuits.token_ov_circuit`).
# Row ``i`` says which logits go up when the head attends to token ``i``. A head that *copies*
# puts the largest entry of each row on the diagonal. Two numbers summarise that: the **argmax
# copying fraction**, the fraction of tokens whose own logit the head raises most
# (:func:`~mha_ref.tutorial.circuits.argmax_copying_fraction`), and Elhage et al.'s **copying
# score** from the circuit's eigenvalues, :math:`\sum_i \lambda_i / \sum_i |\lambda_i|`
# (:func:`~mha_ref.tutorial.circuits.eigenvalue_copying_score`; +1 for a head that maps every
# token onto itself, -1 for one that maps tokens away from themselves). That example found the previous-token head in layer 1 and the induction
# heads in layer 2 by where they look; compare what they write.
#
# One caution when reading the table: this circuit is the *direct path*, from the embedding
# through the head straight to the unembedding. The layer-2 heads write to the logits, so for
# them it is the path that matters. The layer-1 head's output matters elsewhere: through what it
# writes into the keys that layer 2 searches (K-composition). Its copying scores say what it
# would write if its output went straight to the logits, not what it does for the model.

induction_model = train_induction(seed=0).model().double()
token_names = list("ABCDEFGHIJKLMNOPQRSTUVWX")  # one name per token id
with torch.no_grad():
    circuits = {
        (layer, head): token_ov_circuit(induction_model, layer, head)  # (vocab, vocab)
        for layer in range(2)
        for head in range(2)
    }
rows = [
    [
        f"layer {layer + 1} head {head}",
        rank(qk_matrix(induction_model.layers[layer], head)),
        rank(ov_matrix(induction_model.layers[layer], head)),
        f"{argmax_copying_fraction(circuit):.3f}",
        f"{eigenvalue_copying_score(circuit):+.3f}",
    ]
    for (layer, head), circuit in circuits.items()
]
print(f"head_dim: {induction_model.layers[0].head_dim}")
print(
    text_table(
        ["head", "rank of QK", "rank of OV", "argmax copying fraction", "copying score (eigenvalues)"],
        rows,
    )
)

fig = plot_matrices(
    [circuits[(1, 0)], circuits[(1, 1)]],
    ["layer 2 head 0", "layer 2 head 1"],
    suptitle="What the layer-2 heads write: tokens to logits",
    xlabel="logit of token",
    ylabel="attended token",
    tick_labels=token_names,
)
plt.show()

# %%
# .. _ex11-where-the-layer-1-head-output-is-used:
#
# Where the layer-1 head's output is used
# ---------------------------------------
# The direct path does not show what the previous-token head does, but an intervention can. Layer
# 2 reads the residual stream three times: for its queries, its keys and its values. Below, the
# layer-1 head is removed from *one* of these inputs at a time
# (:func:`~mha_ref.tutorial.induction.composition_ablation`), and everything else, including the
# path to the logits, keeps it. What to look for: which input loses the second-copy accuracy. If
# it is the keys, the head works by K-composition: it writes "the previous token" into each
# position so that layer 2 can search for it.

eval_tokens, eval_periods = train_induction(seed=0).evaluation_batch()  # (N, L), (N,)
previous_head = int(head_scores(induction_model, eval_tokens, eval_periods)[0][0].argmax())
composition = composition_ablation(induction_model, eval_tokens, eval_periods, previous_head)
print(f"layer 1 head {previous_head} (the previous-token head), second-copy accuracy:")
print(f"  full model:                   {composition['none']:.3f}")
print(f"  removed from layer 2 queries: {composition['Q']:.3f}")
print(f"  removed from layer 2 keys:    {composition['K']:.3f}")
print(f"  removed from layer 2 values:  {composition['V']:.3f}")

# %%
# .. _ex11-elhage-et-al-composition-scores:
#
# Elhage et al.'s composition scores, and whether they agree with the ablation
# ----------------------------------------------------------------------------
# Elhage et al. also measure composition from the weights alone: for the layer-1 head's OV
# matrix :math:`OV_1` and a layer-2 head's matrices, the **composition score**
# :math:`\|M_1 M_2\|_F / (\|M_1\|_F \|M_2\|_F)`, with :math:`M_1 M_2 = OV_1 QK_2` for
# Q-composition, :math:`OV_1 QK_2^\top` for K-composition and :math:`OV_1 OV_2` for
# V-composition (:func:`~mha_ref.tutorial.circuits.composition_scores`). A score means something
# only against what unrelated heads of the same shapes give: the mean over random Gaussian
# heads (:func:`~mha_ref.tutorial.circuits.random_composition_baseline`). Each of its two
# matrices is a product ``A @ B`` of matrices of standard normal entries, of shapes
# ``(embed_dim, head_dim)`` and ``(head_dim, embed_dim)``: the same size and the same rank,
# ``head_dim``, as a real head's QK or OV matrix. The score divides by both norms, so the scale
# of the entries does not matter; the baseline is the mean over 200 such pairs. The weights only
# suggest; the ablation above measures. So the question is whether the two agree, and on more
# than one model: below, the same recipe trained with seeds 0, 1 and 2 (seed 0 is the model
# above). For each seed, the composition the ablation finds is the input of layer 2 whose
# ablation costs the most accuracy; the scores agree with it if, for both layer-2 heads, that
# composition's score is the largest of the three and above the random baseline.

layer_1 = induction_model.layers[0]
baseline_draws = 200
baseline = random_composition_baseline(layer_1.embed_dim, layer_1.head_dim, draws=baseline_draws, seed=0)
print(f"random baseline (embed_dim={layer_1.embed_dim}, head_dim={layer_1.head_dim}, mean of {baseline_draws} pairs): {baseline:.3f}")
evidence_rows, agreed, seed_runs = [], 0, {}
for seed in (0, 1, 2):
    run = train_induction(seed=seed)
    seed_model = run.model().double()
    seed_tokens, seed_periods = run.evaluation_batch()  # (N, L), (N,)
    prev = int(head_scores(seed_model, seed_tokens, seed_periods)[0][0].argmax())
    seed_runs[seed] = (seed_model, seed_tokens, seed_periods, prev)
    ablated = composition_ablation(seed_model, seed_tokens, seed_periods, prev)
    by_ablation = min("QKV", key=lambda c: ablated[c])
    scores = [composition_scores(seed_model.layers[0], prev, seed_model.layers[1], h) for h in range(2)]
    agree = all(max("QKV", key=s.get) == by_ablation and s[by_ablation] > baseline for s in scores)
    agreed += agree
    evidence_rows.append(
        (
            seed,
            prev,
            " / ".join(f"{ablated[c]:.3f}" for c in "QKV"),
            by_ablation,
            *(" / ".join(f"{s[c]:.3f}" for s in scores) for c in "QKV"),
            "yes" if agree else "no",
        )
    )
print(
    text_table(
        [
            "seed",
            "prev. head",
            "acc. without it in Q / K / V",
            "ablation",
            "Q score (L2 h0 / h1)",
            "K score",
            "V score",
            "agree",
        ],
        evidence_rows,
    )
)
print(f"seeds on which the scores agree with the ablation: {agreed} of 3")

# %%
# What to read off (the numbers are the table's): on each seed, removing the previous-token
# head from layer 2's keys is what costs accuracy, and its K-composition score with each layer-2
# head lies above the random baseline while its Q and V scores lie below it. The weights-only
# measure and the intervention tell the same story on the seeds where the last column says yes.
# The score alone would not have been enough: it is a property of the weights and says nothing
# about whether the model uses that path; the ablation does.

# %%
# .. _ex11-activation-patching:
#
# Activation patching: which positions carry the circuit
# ------------------------------------------------------
# Ablation removes a head; **activation patching** asks where the information the prediction
# needs is. Two runs: the clean sequence, and a corrupted one in which one token of the *first*
# copy, at position ``c``, is replaced by a token the sequence does not contain
# (:func:`~mha_ref.tutorial.induction.corrupt_first_copy`). At ``q = c + period`` the same token
# returns in the second copy, and the clean model predicts the token that followed it the first
# time, ``tokens[c + 1]``; in the corrupted run that match is gone. Then we run the corrupted
# sequence again with *one* activation taken from the clean run
# (:func:`~mha_ref.tutorial.induction.patched_logits`): one head's output at every position, or
# the whole residual stream after layer 1 at one position. The number is the fraction of
# sequences whose prediction at ``q`` is the clean answer again. What to look for: which head and
# which position bring it back. Seeds 0, 1 and 2, as above.

patch_rows = []
for seed, (seed_model, seed_tokens, seed_periods, prev) in seed_runs.items():
    corrupted, changed, query = corrupt_first_copy(seed_tokens, seed_periods, seed_model.unembed.out_features)
    batch_index = torch.arange(len(seed_tokens))  # (N,)
    answer = seed_tokens[batch_index, changed + 1]  # (N,) the clean prediction at q

    def restored(logits, batch_index=batch_index, query=query, answer=answer):
        """Fraction of sequences whose prediction at q is the clean answer."""
        return (logits[batch_index, query].argmax(dim=-1) == answer).double().mean().item()

    with torch.no_grad():
        row = [seed, prev, f"{restored(seed_model(seed_tokens)[0]):.3f}", f"{restored(seed_model(corrupted)[0]):.3f}"]
    row += [f"{restored(patched_logits(seed_model, seed_tokens, corrupted, head=(0, h))):.3f}" for h in (prev, 1 - prev)]
    row += [f"{restored(patched_logits(seed_model, seed_tokens, corrupted, position=p)):.3f}" for p in (changed, changed + 1, query)]
    patch_rows.append(row)
print(
    text_table(
        [
            "seed",
            "prev. head",
            "clean",
            "corrupted",
            "patch prev. head",
            "patch other L1 head",
            "patch position c",
            "patch c + 1",
            "patch q",
        ],
        patch_rows,
    )
)

# %%
# Read it with the circuit in mind (the numbers are the table's). Patching the clean output of
# the previous-token head brings the answer back on every seed; patching the other layer-1 head
# brings back far less (a small part on every seed, most on seed 1). And
# of the three positions, the one that restores it is ``c + 1``, not ``c``, the token that was
# changed, nor the query ``q``: after layer 1 the information "the token before me was
# ``tokens[c]``" sits at ``c + 1``, where the previous-token head wrote it, and that is the key
# layer 2's induction head matches. Patching ``c`` after layer 1 comes too late: position
# ``c + 1`` already read the corrupted token there. This is K-composition, located by position.

# %%
# .. _ex11-what-this-shows:
#
# What this shows
# ---------------
# The decomposition is exact: the printed difference is at the level of float64 rounding. A
# head's QK and OV matrices are low-rank, and they are independent: copying QK made two heads
# look at the same tokens while they kept writing different vectors, and in the trained model the
# induction heads in layer 2 copy the token they attend to into the logits, the OV behaviour
# their task needs. The layer-1 previous-token head's score is measured on a path it does not
# use: what it contributes goes into the keys of layer 2, and the intervention above
# measures it on that path. So a heatmap of attention weights says
# where a head reads from, never what it adds to the output; claims about what a head
# contributes need its OV side, or an ablation.

# %%
# .. _ex11-exercises:
#
# Exercises
# ---------
# **Exercise 1.** On a copy of the seeded module, multiply head 0's query projection (its rows of
# :math:`W^Q` and of the query bias) by 2; on another copy, do the same to its value projection
# instead. For each change, predict: do head 0's attention weights change? Is head 0's term
# multiplied by 2, changed in some other way, or left alone? Does head 1's term change?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The query projection is on the QK side: it multiplies every score of head 0, so the softmax
#    gets sharper and the attention weights change; the term changes with them, though not by 2, and
#    the OV matrix is the same as before. The value projection is on the OV side: the weights do not
#    move, and the term, a weighted sum of the values, is multiplied by 2. Head 1 has its own rows
#    of every projection, so neither change reaches its term:

import copy

factor = 2.0
head0 = slice(0, module.head_dim)  # head 0's rows of each input projection
rows = []
for name, which in (("query", 0), ("value", 2)):
    changed = copy.deepcopy(module)
    with torch.no_grad():
        changed.projection_weights()[which][head0] *= factor  # (head_dim, embed_dim)
        changed.projection_biases()[which][head0] *= factor  # (head_dim,)
        _, new_weights = head_contexts(changed, x, x, x, blocked)  # (batch, num_heads, seq_len, seq_len)
        new_terms = head_outputs(changed, x, x, x, blocked)  # (batch, num_heads, seq_len, embed_dim)
    rows.append(
        [
            f"head 0's {name} projection x {factor:g}",
            f"{(new_weights[0, 0] - weights[0, 0]).abs().max():.1e}",
            f"{(new_terms[0, 0] - factor * terms[0, 0]).abs().max():.1e}",
            f"{(new_terms[0, 1] - terms[0, 1]).abs().max():.1e}",
        ]
    )
print("max |new - old| (for head 0's term: max |new - factor x old|):")
print(text_table(["change", "head 0's weights", "head 0's term", "head 1's term"], rows))

# %%
# **Exercise 2.** The unembedding is linear, so the induction model's logits are a sum of terms:
# the embeddings, each head's term in layer 1, each head's term in layer 2, and the biases. Keep
# only some of them and predict the second-copy accuracy: the two layer-2 heads' terms alone;
# each of those terms alone; everything *except* those two terms.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The layer-2 heads attend to the token that followed the earlier occurrence of the current
#    one (the induction example measured where they look), and their OV circuits copy the token
#    they attend to into its own logit (the copying fractions and scores above). So their terms alone should
#    carry the prediction, each head's even on its own, and what is left without them should do
#    no better than a guess. The terms are computed with
#    :func:`~mha_ref.tutorial.circuits.head_outputs` on the residual stream after layer 1; for
#    the terms alone, the unembedding's bias is left out:

from mha_ref.tutorial.induction import second_copy_accuracy

seq_len = eval_tokens.shape[1]
causal_blocked = ~causal_mask(seq_len)  # (seq_len, seq_len), True = blocked
first, second = induction_model.layers
w_u = induction_model.unembed.weight  # (vocab_size, embed_dim)
with torch.no_grad():
    embedded = induction_model.token_embedding(eval_tokens)  # (N, seq_len, embed_dim)
    x0 = embedded + induction_model.position_embedding(torch.arange(seq_len))  # (N, seq_len, embed_dim)
    x1 = x0 + first(x0, x0, x0, attn_mask=causal_blocked)[0]  # (N, seq_len, embed_dim) after layer 1
    layer2 = head_outputs(second, x1, x1, x1, causal_blocked)  # (N, num_heads, seq_len, embed_dim)
    logits = {  # each (N, seq_len, vocab_size)
        "full model": induction_model(eval_tokens)[0],
        "layer 2 heads' terms only": layer2.sum(dim=1) @ w_u.T,
        "layer 2 head 0's term only": layer2[:, 0] @ w_u.T,
        "layer 2 head 1's term only": layer2[:, 1] @ w_u.T,
        "all but the layer 2 heads' terms": induction_model.unembed(x1 + second.out_proj.bias),
    }
rows = [[name, f"{second_copy_accuracy(z, eval_tokens, eval_periods):.3f}"] for name, z in logits.items()]
rows.append(["(a uniform guess)", f"{1 / w_u.shape[0]:.3f}"])
print(text_table(["logits from", "second-copy accuracy"], rows))

# %%
# .. _ex11-summary:
#
# Summary
# -------
# * A layer's output is exactly the sum of one term per head, each through its own QK matrix
#   (where it looks) and OV matrix (what it writes); both have rank at most ``head_dim``.
# * In the induction model the layer-2 heads copy: their argmax copying fraction and Elhage et
#   al.'s eigenvalue copying score are both near their maximum.
# * The previous-token head acts through layer 2's keys: the composition ablation, the
#   composition scores against a random baseline and activation patching agree on the three
#   seeds (the tables say how many agreed). Patching places the circuit at position ``c + 1``,
#   where the previous-token head writes.
# * Weights suggest (heatmaps, scores); interventions (ablation, patching) measure.
