"""
Example 20: Positions inside attention
======================================

Attention by itself does not know the order of its inputs: every score is a dot product of one
query with one key, and nothing in it says where either token stands. Every language model
therefore adds position information, and in today's models it sits *inside* the attention
layer, per head: rotary position embedding (RoPE, Su et al. 2021, `arXiv:2104.09864
<https://arxiv.org/abs/2104.09864>`_) rotates each head's queries and keys, ALiBi (Press et al.
2022, `arXiv:2108.12409 <https://arxiv.org/abs/2108.12409>`_) gives each head its own penalty
for distance. The original Transformer added a learned or a sinusoidal vector to each token
instead (Vaswani et al. 2017, Sec. 3.5), and a causal model can even do without any (Haviv et
al. 2022, `arXiv:2203.16634 <https://arxiv.org/abs/2203.16634>`_).

This page shows numerically that attention without positions ignores order, what each of the
five schemes changes in the scores, and then tests example 10's open question: its induction
model fails when the two copies are further apart than in training. Is its learned position
embedding the cause? The model is retrained with each of the five schemes, five seeds each, every
run until it converges or reaches one step cap, and the fall is traced to the layer that uses
position, by switching position off there.
"""

# %%
# .. _ex20-without-positions-order-does-not-matter:
#
# Without positions, order does not matter
# ----------------------------------------
# Take one attention layer, random inputs for 8 tokens, and a shuffled order of the tokens.
# Without positions, shuffling the inputs shuffles the outputs in the same way and changes
# nothing else: attention is *permutation-equivariant*. The first column below measures it, as
# the largest difference between "shuffle, then attend" and "attend, then shuffle". Each scheme
# then puts position in its own place:
#
# - **learned** and **sinusoidal**: a vector per position added to each token's input;
# - **RoPE**: each head's queries and keys rotated by an angle proportional to their position;
# - **ALiBi**: ``-slope * |i - j|`` added to the score of query ``i`` and key ``j``;
# - **causal mask** alone: query ``i`` may see keys ``0 .. i`` only.
#
# The second column moves the whole sequence 5 positions later. Schemes that see only the
# distance between two tokens (*relative* positions) give the same outputs; schemes that see
# where each token is (*absolute* positions) do not.

import statistics

import matplotlib.pyplot as plt
import torch

from mha_ref import (
    GroupedQueryAttention,
    RotaryEmbedding,
    alibi_bias,
    alibi_slopes,
    causal_mask,
    scaled_dot_product_attention,
)
from mha_ref.tutorial.induction import (
    AttentionOnlyTransformer,
    accuracy_with_ablation,
    head_scores,
    make_repeated_batch,
    previous_token_score,
    sinusoidal_positions,
)
from mha_ref.tutorial.plotting import plot_lines, text_table
from mha_ref.tutorial.positions import (
    SHORT_RECIPE,
    diagonal_spread,
    plot_score_maps,
    position_scores,
    position_study,
    positions_removed,
)

torch.manual_seed(0)
embed_dim, num_heads, seq_len, shift = 32, 2, 8, 5
head_dim = embed_dim // num_heads
plain = GroupedQueryAttention(embed_dim, num_heads, num_heads, dtype=torch.float64).eval()
rotary = GroupedQueryAttention(
    embed_dim, num_heads, num_heads, dtype=torch.float64, rope=RotaryEmbedding(head_dim, 64)
).eval()
rotary.load_state_dict(plain.state_dict())  # the same weights; only the rotation differs
learned_table = torch.randn(64, embed_dim, dtype=torch.float64)  # a learned table, here random
sine_table = sinusoidal_positions(64, embed_dim).double()  # (64, embed_dim)
x = torch.randn(1, seq_len, embed_dim, dtype=torch.float64)  # (1, seq_len, embed_dim)
order = torch.randperm(seq_len)


def attend(scheme, x, start):
    """The layer's output for the tokens ``x`` placed at positions ``start, start + 1, ...``."""
    where = torch.arange(start, start + x.shape[1])  # (seq_len,)
    if scheme == "none":
        return plain(x)[0]
    if scheme == "causal mask":
        return plain(x, is_causal=True)[0]
    if scheme == "learned":
        return plain(x + learned_table[where])[0]
    if scheme == "sinusoidal":
        return plain(x + sine_table[where])[0]
    if scheme == "RoPE":
        return rotary(x, positions=where, key_positions=where)[0]
    bias = alibi_bias(num_heads, x.shape[1], dtype=torch.float64)  # (heads, seq_len, seq_len)
    return plain(x, attn_mask=bias)[0]  # ALiBi: the same bias wherever the sequence starts


schemes = ["none", "causal mask", "learned", "sinusoidal", "RoPE", "ALiBi"]
rows = []
with torch.no_grad():
    for scheme in schemes:
        shuffled = (attend(scheme, x[:, order], 0) - attend(scheme, x, 0)[:, order]).abs().max()
        moved = (attend(scheme, x, shift) - attend(scheme, x, 0)).abs().max()
        rows.append([scheme, f"{shuffled:.1e}", f"{moved:.1e}"])
print(text_table(["positions", "shuffled tokens: change", f"shifted by {shift}: change"], rows))

# %%
# Only the layer without positions and without a mask ignores order (its differences are
# float64 rounding errors). The causal mask alone breaks the symmetry, and so does
# every scheme. Learned and sinusoidal vectors also change the outputs when the sequence is
# shifted; RoPE and ALiBi do not: they see only distances.
#
# .. _ex20-a-causal-model-can-count:
#
# A causal model can count
# ------------------------
# Haviv et al. found that causal language models trained with no position information at all
# still learn where each token is, and reach nearly the perplexity of models with positions.
# The causal mask is enough: a head that spreads its weight evenly over the keys it may see
# returns, at position ``t``, the mean of ``t + 1`` values, and a mean of more values is
# smaller. Below, many random sequences, queries that are all zero (so every allowed key gets
# the same weight), and the size of the output at each position, beside the
# ``sqrt(head_dim / (t + 1))`` that a mean of ``t + 1`` independent standard normal vectors has:

values = torch.randn(4000, 1, 20, head_dim, dtype=torch.float64)  # (sequences, 1 head, 20, 16)
zeros = torch.zeros_like(values)  # every score 0: equal weights over the allowed keys
means = scaled_dot_product_attention(zeros, zeros, values, is_causal=True)  # (4000, 1, 20, 16)
size = means.norm(dim=-1).pow(2).mean(dim=(0, 1)).sqrt()  # (20,) root-mean-square size
rows = [[t, f"{size[t]:.3f}", f"{(head_dim / (t + 1)) ** 0.5:.3f}"] for t in (0, 1, 3, 7, 15, 19)]
print(text_table(["position t", "size of the output", "sqrt(head_dim / (t + 1))"], rows))

# %%
# The size of the output falls with the position as the formula says, so a later layer can
# read "how far into the sequence am I" from it. That is position information the model makes
# for itself; it takes one layer to make it.
#
# .. _ex20-what-each-scheme-adds-to-the-scores:
#
# What each scheme adds to the scores
# -----------------------------------
# The heatmaps below show, for the two heads of the first layer of example 10's model
# (:class:`~mha_ref.tutorial.induction.AttentionOnlyTransformer`, before any training, the same
# initial weights for every scheme), what the positions add to the scores: the scores on a
# sequence that repeats one token, with the positions minus without them, averaged over all
# tokens (:func:`~mha_ref.tutorial.positions.position_scores`). With the same content
# everywhere, what is left comes from the positions alone. Rows are queries, columns keys; grey
# cells are blocked by the causal mask. What to look for:
#
# - **learned** (a random table before training) and **sinusoidal**: a pattern that changes
#   along each diagonal, because it depends on where each token is;
# - **RoPE** and **ALiBi**: every diagonal holds one value, because the added part depends only
#   on the distance ``i - j``; ALiBi's is a fixed ramp, steeper in head 0;
# - **none**: nothing at all.
#
# Each map is drawn on its own scale (divided by its largest size, which the table under the
# maps gives). The table also measures the first two points: the largest spread along any
# diagonal, as a fraction of the spread of the whole map (0: the map depends on ``i - j``
# alone).

TOY = dict(vocab_size=24, seq_len=20, embed_dim=32, num_heads=2)  # example 10's sizes
SCHEMES = ["learned", "sinusoidal", "rope", "alibi", "none"]
NAMES = {"learned": "learned", "sinusoidal": "sinusoidal", "rope": "RoPE", "alibi": "ALiBi",
         "none": "none"}
maps, titles, rows = [], [], []
for position in SCHEMES:
    torch.manual_seed(0)  # the same initial weights for every scheme
    untrained = AttentionOnlyTransformer(**TOY, position=position)
    added = position_scores(untrained)  # (heads, 20, 20), NaN where blocked
    spread = diagonal_spread(added)  # (heads,)
    for head in range(2):
        maps.append(added[head])
        titles.append(f"{NAMES[position]}, head {head}")
    largest = added.nan_to_num(0.0).abs().amax(dim=(-2, -1))  # (heads,)
    rows.append([NAMES[position], f"{largest[0]:.3f}", f"{largest[1]:.3f}", f"{spread[0]:.3f}",
                 f"{spread[1]:.3f}"])
fig = plot_score_maps(
    [maps[i] for i in range(0, 10, 2)] + [maps[i] for i in range(1, 10, 2)],
    [titles[i] for i in range(0, 10, 2)] + [titles[i] for i in range(1, 10, 2)],
    ncols=5,
    suptitle="What the positions add to the layer-1 scores (before training)",
    xlabel="key position j",
    ylabel="query position i",
    colorbar_label="added score / its largest size",
)
plt.show()
header = ["positions", "largest size, head 0", "head 1", "spread along diagonals, head 0",
          "head 1"]
print(text_table(header, rows))

# %%
# .. _ex20-why-alibi-and-no-positions-should-fail:
#
# Why ALiBi and no positions should fail, and what training shows
# ----------------------------------------------------------------
# Example 10's circuit needs a *previous-token head* in layer 1: a head that gives the token
# just before each query far more weight than any other key. (As in example 10, the layers of
# this attention-only two-layer model are counted: layer 1 and layer 2 are ``layers[0]`` and
# ``layers[1]`` in the code; a real model's blocks are numbered from 0 as in the code, see
# "block" in the glossary.) In layer 1 the input is the token
# embedding alone for ALiBi and for "none", so the content part of a score depends only on the
# two tokens, never on where they are. Two keys that hold the same token then get weights in a
# fixed ratio: 1 without positions, ``exp(slope * distance between them)`` with ALiBi.
# Measured on one sequence where the same token sits at positions 4 and 11, seen from query 15:

probe = torch.arange(20)[None] % 24  # (1, 20) distinct tokens 0 .. 19
probe[0, 11] = probe[0, 4]  # the same token at positions 4 and 11
slopes = alibi_slopes(2)  # (2,) the paper's slopes for two heads
rows = []
for position in ("alibi", "none"):
    torch.manual_seed(0)
    untrained = AttentionOnlyTransformer(**TOY, position=position)
    with torch.no_grad():
        weights = untrained(probe)[1][0][0]  # (heads, 20, 20) layer 1
    for head in range(2):
        expected = torch.exp(slopes[head] * 7) if position == "alibi" else torch.tensor(1.0)
        ratio = weights[head, 15, 11] / weights[head, 15, 4]
        rows.append([NAMES[position], head, f"{ratio:.4f}", f"{float(expected):.4f}"])
print(text_table(["positions", "head", "weight on key 11 / on key 4", "exp(slope x 7)"], rows))

# %%
# So in these two schemes the previous token can win over the key before it only by being one
# token nearer: by a factor ``exp(slope)`` with ALiBi, by nothing without positions. The
# previous token is a random one, so its content cannot help. If the content's attention scores
# (before the softmax) do not tell the keys apart, the weights come from the positions alone.
# The code below gives them to :func:`~mha_ref.tutorial.induction.previous_token_score`, the
# score the trained models get further down: the weight on key ``t - 1``, averaged over every
# query ``t`` from 1 to 19, each over its keys ``0 .. t``. Early queries have few keys, so they
# give the previous token more weight than late ones. The one key that the content can single
# out is the query's own (it holds the query's token); the last column gives that key no
# weight, the most the content can then add to the previous token:

allowed = causal_mask(20)  # (20, 20) True: key j <= query i
own_key = torch.eye(20, dtype=torch.bool)  # (20, 20) True: each query's own key
own_key[0, 0] = False  # query 0 has no other key; the score does not count it


def positions_only_score(bias, without_own_key):
    """The previous-token score of heads whose weights come from ``bias`` alone, per head."""
    blocked = ~allowed | own_key if without_own_key else ~allowed  # (20, 20)
    weights = torch.softmax(bias.masked_fill(blocked, -torch.inf), dim=-1)  # (heads, 20, 20)
    return previous_token_score(weights[None])  # (heads,) as for the trained models


biases = {
    "ALiBi": alibi_bias(2, 20, dtype=torch.float64),  # (2, 20, 20) -slope * |i - j|
    "none": torch.zeros(2, 20, 20, dtype=torch.float64),  # (2, 20, 20) nothing added
}
blind = {name: positions_only_score(bias, without_own_key=False) for name, bias in biases.items()}
rows = []
for name, bias in biases.items():
    ceiling = positions_only_score(bias, without_own_key=True)  # (heads,)
    for head in range(bias.shape[0]):
        slope = f"{float(slopes[head]):.5f}" if name == "ALiBi" else "0"
        rows.append([name, head, slope, f"{blind[name][head]:.3f}", f"{ceiling[head]:.3f}"])
header = ["positions", "head", "slope", "equal content scores", "own key at zero weight"]
print(text_table(header, rows))

# %%
# With two heads per layer, ALiBi's slopes are ``1/16`` and ``1/256``: far too flat to single
# out one key. With equal content scores the previous token gets 0.156 and 0.138 of the weight,
# hardly more than the 0.137 without positions, and 0.214 at most with the query's own key at
# zero weight. Hence the prediction: neither scheme can give layer 1 the previous-token head
# that example 10's circuit is built on, so neither should form the circuit. It is an argument,
# not a measurement: the model might find a weaker or another way to the task. The trainings
# below test it. (The exercises take up ALiBi with more heads.)
#
# .. _ex20-example-10-model-retrained-with-each-scheme:
#
# Example 10's model, retrained with each scheme
# ----------------------------------------------
# Now the question of example 10: its induction model fails when the two copies are further
# apart than in training. Is the learned absolute position embedding to blame? A model with
# rotary positions sees only distances, so it is the control: the same model, the same data,
# the same initial weights for each seed, with learned positions replaced by RoPE. Sinusoidal
# positions are a second absolute scheme; ALiBi and no positions test the prediction above.
#
# Every scheme is trained with one recipe (``mha_ref.tutorial.positions.SHORT_RECIPE``: example
# 10's model on smaller batches at a higher learning rate), on five seeds each
# (:func:`~mha_ref.tutorial.positions.position_study`). The schemes do not learn at the same
# speed, so a fixed number of steps would compare converged models with partly trained ones.
# Each run therefore trains until it *converges*, with one rule and one cap for every scheme
# (:func:`~mha_ref.tutorial.induction_training.stopping_step`): every 20 steps, the mean
# second-copy accuracy of the last 20 training batches (new sequences each time, scored before
# the model learns from them) is one evaluation, and the run stops once three evaluations in a
# row reach 0.9. A run that never does stops at the cap. Only the positions change between the
# schemes. The table gives for each run the step at which it converged, the phase change step
# (as in example 10; None: none in training), the second-copy accuracy on new sequences, and
# the best previous-token score among the layer-1 heads. The lines under it summarise each
# scheme, and for the runs that reached the cap, compare their training accuracy over the last
# two blocks of 100 steps: is it still rising?

SEEDS = (0, 1, 2, 3, 4)
study = position_study(positions=SCHEMES, seeds=SEEDS, **SHORT_RECIPE)
recipe = SHORT_RECIPE
print(f"recipe: at most {recipe['steps']} steps, batches of {recipe['batch_size']} sequences, "
      f"learning rate {recipe['lr']}; stop once {recipe['stop_evaluations']} evaluations in a "
      f"row reach {recipe['stop_accuracy']} (an evaluation every {recipe['stop_window']} steps: "
      f"the mean accuracy of the last {recipe['stop_window']} batches)")
rows = [
    [NAMES[run.position], run.seed,
     "not by the cap" if run.converged_step is None else run.converged_step,
     run.phase_change, f"{run.accuracy:.3f}", f"{run.previous_token:.3f}"]
    for run in study.runs
]
print(text_table(["positions", "seed", "converged at step", "phase change", "accuracy",
                  "previous-token score"], rows))
for position in SCHEMES:
    runs, done = study.of(position), study.converged(position)
    steps = [run.converged_step for run in done]
    when = (f" at step {statistics.median(steps):g} (median; {min(steps)} to {max(steps)})"
            if done else "")
    formed = sum(run.phase_change is not None for run in runs)
    accurate = sum(run.accuracy > 0.9 for run in runs)
    scores = [run.previous_token for run in runs]
    print(f"{NAMES[position]}: converged on {len(done)} of {len(runs)} seeds"
          f"{when}; phase change on {formed}, accuracy above 0.9 on {accurate}, "
          f"previous-token score {min(scores):.3f} to {max(scores):.3f}")
cap = SHORT_RECIPE["steps"]
for position in SCHEMES:
    capped = [run for run in study.of(position) if run.converged_step is None]
    if capped:  # is their training accuracy still rising at the cap?
        before = [sum(run.accuracy_curve[cap - 200 : cap - 100]) / 100 for run in capped]
        last = [sum(run.accuracy_curve[cap - 100 :]) / 100 for run in capped]
        rising = sum(b > a for a, b in zip(before, last, strict=True))
        print(f"{NAMES[position]}, {len(capped)} runs to the cap: training accuracy "
              f"{min(before):.3f} to {max(before):.3f} (steps {cap - 199} to {cap - 100}), "
              f"{min(last):.3f} to {max(last):.3f} (steps {cap - 99} to {cap}); higher in the "
              f"later block in {rising} runs")
changes = [run.phase_change for run in study.runs if run.phase_change is not None]
print(f"slowest phase change: step {max(changes)}; cap: {cap} steps")
LEARNERS = [p for p in SCHEMES if study.converged(p)]
print("schemes with converged runs:", ", ".join(NAMES[p] for p in LEARNERS))
for position in ("alibi", "none"):  # the level of equal content scores, computed above
    runs = study.of(position)
    scores = [run.previous_token for run in runs]
    levels = sorted({f"{blind[NAMES[position]][run.previous_head]:.3f}" for run in runs})
    print(f"{NAMES[position]}: previous-token score in layer 1 {min(scores):.3f} to "
          f"{max(scores):.3f}; the same heads with equal content scores: {', '.join(levels)}")

# %%
# Learned, sinusoidal and rotary positions converge on 5 of 5 seeds each, and every run forms
# the circuit: a phase change, accuracy above 0.9, and a layer-1 head with a previous-token
# score of 0.656 or more. RoPE's runs spread the most: they converge at step 240 to 400,
# against 240 to 320 with learned and 300 to 320 with sinusoidal positions. They include the
# slowest run, converged at step 400, and the slowest phase change, at step 287; the cap of 600
# steps is more than twice that, so it is not what limits any of these runs.
#
# The prediction for ALiBi and no positions holds within this budget: no run converges or has
# a phase change, and no layer-1 head becomes a previous-token head. Their previous-token
# scores sit at the level that equal content scores give (the last two lines):
# 0.157 to 0.160 for ALiBi against 0.156, 0.138 to 0.141 without positions against 0.137.
# They do learn part of the task another way: accuracies of 0.394 to 0.473 (ALiBi) and 0.315
# to 0.343 (none) in the table, and their training accuracy is higher in the last 100 steps
# than in the 100 before on every run. So this page does not say that they would never learn
# the task; it says that they do not within a budget in which the other three schemes converge
# on every seed, and that what they learn does not go through a previous-token head.
#
# What did training make of the positions in that head? Below, for the three schemes that
# converge: what the positions add to its attention scores (before the softmax), as before, for
# the first converged seed of each scheme, and for every converged run the mean added score at
# each offset ``i - j`` (0:
# the query's own key, 1: the previous token). With RoPE each diagonal holds one value; with the
# learned and the sinusoidal tables it varies along the diagonal.

maps, titles, rows, top_offsets = [], [], [], []
runs_shown = [run for p in LEARNERS if p != "none" for run in study.converged(p)]
for run in runs_shown:
    added = position_scores(study.model(run.position, run.seed))[run.previous_head]  # (20, 20)
    by_offset = [float(added.diagonal(offset=-offset).mean()) for offset in range(20)]
    top_offsets.append(max(range(20), key=lambda offset: by_offset[offset]))
    rows.append([NAMES[run.position], run.seed, run.previous_head]
                + [f"{value:.1f}".replace("-0.0", "0.0") for value in by_offset[:6]])
    if run is study.converged(run.position)[0]:  # one map per scheme: its first converged seed
        maps.append(added)
        titles.append(f"{NAMES[run.position]}, seed {run.seed}, head {run.previous_head}")
fig = plot_score_maps(
    maps,
    titles,
    ncols=len(maps),
    suptitle="What the positions add to a trained previous-token head's scores",
    xlabel="key position j",
    ylabel="query position i",
    colorbar_label="added score / its largest size",
)
plt.show()
print(text_table(["positions", "seed", "head"] + [f"offset {o}" for o in range(6)], rows))
for position in [p for p in LEARNERS if p != "none"]:
    tops = [top for run, top in zip(runs_shown, top_offsets, strict=True)
            if run.position == position]
    print(f"{NAMES[position]}: largest mean added score at offset 1 on {tops.count(1)} of "
          f"{len(tops)} seeds")

# %%
# The last lines count the runs on which the positions raise the attention score (before the
# softmax) of the previous token (offset 1) more than that of any other offset. With learned
# and with rotary positions that is every seed: in that head the positions add the most score
# at offset 1. With sinusoidal positions it is no seed: they raise offsets 0 and 1 about
# equally on every seed (the table), so the added scores alone do not tell the previous token
# from the query's own key.
#
# A table of added scores shows where the positions raise the scores, not whether the head
# needs them to find the previous token. That takes an intervention: layer 1's queries and keys
# computed without positions (:func:`~mha_ref.tutorial.positions.positions_removed` on
# ``layers[0]``; learned and sinusoidal: without the position embedding in their input; RoPE:
# without the rotation). Layer 1's values and layer 2 are computed as before. On 512 new
# sequences, each converged run's previous-token head and the second-copy accuracy, with and
# without positions in layer 1's search:

config = study.config
tokens, periods = make_repeated_batch(
    512, config["seq_len"], config["vocab_size"], torch.Generator().manual_seed(2),
    config["min_period"], config["max_period"],
)  # (512, 20), (512,) new sequences
for position in [p for p in LEARNERS if p != "none"]:
    scores, scores_without, accuracy, accuracy_without = [], [], [], []
    for run in study.converged(position):
        model = study.model(run.position, run.seed)
        previous = head_scores(model, tokens, periods)[0]  # (layers, heads)
        scores.append(float(previous[0, run.previous_head]))
        accuracy.append(accuracy_with_ablation(model, tokens, periods))
        with positions_removed(model, [0]):  # layers[0]: layer 1 searches by content alone
            previous = head_scores(model, tokens, periods)[0]  # (layers, heads)
            scores_without.append(float(previous[0, run.previous_head]))
            accuracy_without.append(accuracy_with_ablation(model, tokens, periods))
    print(f"{NAMES[position]}, {len(scores)} converged runs: previous-token score "
          f"{min(scores):.3f} to {max(scores):.3f}, without positions in layer 1 "
          f"{min(scores_without):.3f} to {max(scores_without):.3f}; accuracy "
          f"{min(accuracy):.3f} to {max(accuracy):.3f}, without "
          f"{min(accuracy_without):.3f} to {max(accuracy_without):.3f}")
equal_level = float(blind[NAMES["none"]][0])  # head 0; without positions both heads alike
own_key_level = float(positions_only_score(biases[NAMES["none"]], without_own_key=True)[0])
print(f"content-only levels (no positions, from the table above): equal content scores "
      f"{equal_level:.3f}, own key at zero weight {own_key_level:.3f}")

# %%
# Without positions in its search, the head loses the previous token on every converged run
# of the three schemes: its score falls from 0.659 or more to at most 0.183, between the two
# levels that content alone can give (the last line: 0.137 with equal content scores, 0.187
# with the query's own key at zero weight), and the accuracy falls to 0.266 at most. So in all
# three the layer-1 head finds the previous token through the positions, sinusoidal positions
# included. With sinusoidal positions the score without them, 0.181 to 0.183, is about the
# level where the own key gets no weight; that suggests that, without positions, the content
# gives the query's own key almost no weight. What, with sinusoidal positions, tells the
# previous token from the query's own key is not measured here.

# %%
# .. _ex20-further-apart-than-in-training:
#
# Further apart than in training
# ------------------------------
# Example 10's exercise 2 again, on every converged run (a run that did not converge is left
# out: its fall would mix distance with unfinished training): all sequences have period 5; the
# first copy moves earlier two positions at a time and filler fills the gap, so the distance
# between the two copies grows from 5 to 15, while training only showed distances 3 to 10.
# Each cell gives the mean accuracy of the scheme's converged runs and, in brackets, the lowest
# and the highest (the line above the table says how many runs each cell averages). The
# columns "layer 2 without positions" run the same models with an intervention
# (:func:`~mha_ref.tutorial.positions.positions_removed`): layer 2's queries and keys are
# computed without positions (learned and sinusoidal: without the position embedding in their
# input; RoPE: without the rotation). Its values, and everything layer 1 wrote, are kept.


def over_converged(position, field):
    """Mean [lowest, highest] over the converged runs, at each distance: one string each."""
    runs = study.converged(position)
    cells = []
    for i in range(len(study.gaps)):
        values = [getattr(run, field)[i] for run in runs]
        cells.append(f"{sum(values) / len(values):.2f} [{min(values):.2f}, {max(values):.2f}]")
    return cells


columns = {}
for position in LEARNERS:
    columns[NAMES[position]] = over_converged(position, "gaps")
    if position != "none":
        columns[f"{NAMES[position]}, layer 2 without positions"] = over_converged(
            position, "gaps_without_positions"
        )
rows = [[d] + [column[i] for column in columns.values()] for i, d in enumerate(study.distances)]
print(f"trained distances: {study.config['min_period']} to {study.config['max_period']}")
print("converged runs in each cell: "
      + ", ".join(f"{NAMES[p]} {len(study.converged(p))}" for p in LEARNERS))
print(text_table(["distance", *columns], rows))

# %%
# The same numbers as curves, the mean over the converged runs (the grey band marks the
# trained distances):


def mean_of(position, field):
    runs = study.converged(position)
    return [sum(getattr(run, field)[i] for run in runs) / len(runs) for i in range(len(study.gaps))]


curves, styles = {}, {}
for index, position in enumerate(LEARNERS):
    curves[NAMES[position]] = mean_of(position, "gaps")
    styles[NAMES[position]] = {"color": f"C{index}"}
    if position != "none":
        label = f"{NAMES[position]}, layer 2 without positions"
        curves[label] = mean_of(position, "gaps_without_positions")
        styles[label] = {"ls": "--", "color": f"C{index}"}
fig = plot_lines(
    study.distances,
    curves,
    xlabel="distance between the two copies (tokens)",
    ylabel="second-copy accuracy (mean of the converged runs)",
    title="Accuracy as the copies move apart",
    styles=styles,
)
fig.axes[0].axvspan(
    study.config["min_period"], study.config["max_period"], color="grey", alpha=0.15
)
plt.show()

# %%
# How many converged runs agree, comparing the largest distance (15, the first copy at the
# start of the sequence) with distance 9, inside the trained range:

far, inside = len(study.gaps) - 1, study.distances.index(9)
for position in [p for p in LEARNERS if p != "none"]:
    runs = study.converged(position)
    falls = sum(run.gaps[far] < run.gaps[inside] - 0.05 for run in runs)
    helped = sum(run.gaps_without_positions[far] > run.gaps[far] for run in runs)
    flatter = sum(
        run.gaps_without_positions[inside] - run.gaps_without_positions[far]
        < run.gaps[inside] - run.gaps[far]
        for run in runs
    )
    near, last = study.distances[inside], study.distances[far]
    print(f"{NAMES[position]}: falls by more than 0.05 from distance {near} to {last} on "
          f"{falls} of {len(runs)} converged runs; layer 2 without positions is higher at "
          f"distance {last} on {helped}, and falls less from {near} to {last} on {flatter}")

# %%
# .. _ex20-longer-than-in-training:
#
# Longer than in training
# -----------------------
# The other kind of unseen length: sequences with more filler before the two copies, so that
# the copies sit at positions never seen in training, at the distances of training (3 to 10).
# The learned table has no row for a position beyond 19: that model cannot even run them.
# Sinusoidal positions have a formula for every position, so that model can. Converged runs
# only; the last lines give each scheme's mean and how many runs it averages.

header = ["positions", "seed"] + [f"{length} tokens" for length in study.longer_lens]
rows = [
    [NAMES[run.position], run.seed]
    + ["cannot run" if acc is None else f"{acc:.3f}" for acc in run.longer]
    for position in LEARNERS
    for run in study.converged(position)
]
print(text_table(header, rows))
for position in LEARNERS:
    runs = study.converged(position)
    means = [
        f"{length} tokens {sum(run.longer[i] for run in runs) / len(runs):.3f}"
        for i, length in enumerate(study.longer_lens)
        if runs[0].longer[i] is not None
    ]
    print(f"{NAMES[position]}, mean of {len(runs)} converged runs: "
          + (", ".join(means) if means else "cannot run"))

# %%
# .. _ex20-what-this-shows:
#
# What this shows
# ---------------
# Read the tables together. Two of the five schemes, ALiBi with two heads and no positions,
# form no previous-token head and do not converge on any seed within the cap, as the analysis
# predicted; they learn part of the task another way, and are still learning at the cap. The
# other three converge on every seed, and none of them escapes example 10's fall: learned,
# sinusoidal and rotary positions all fall when the copies are further apart than in training,
# on 5 of 5 converged runs each. So the learned position embedding is not needed for the fall:
# rotary positions, which see only distances, fall too (retrained with this page's recipe, not
# example 10's). What the three share is
# that layer 2's search uses position: with its queries and keys computed without positions,
# accuracy falls less from inside the trained range and is higher at the largest distance, on
# every converged run, at some cost at the shortest distances. Training on distances 3 to 10
# lets the induction head prefer those distances; nothing forces it to search by content alone.
#
# RoPE does something learned positions cannot: it runs sequences longer than any in training,
# and keeps most of its accuracy at 30 tokens (0.874 in the mean of its 5 converged runs, 0.814
# on the lowest), less at 40 (0.720 in the mean, with one run at 0.582). Sinusoidal positions
# run them too, and lose most of their accuracy already at 30 tokens (0.333 in the mean of 5),
# on every run.
# Being able to run longer sequences does not make them right: at 40 tokens a rotary head meets
# query-key distances beyond any in training, and the causal layers' own position signal (the
# size of a causal mean, above) leaves its trained range too; which of the two costs the
# accuracy is not measured here.

# %%
# .. _ex20-exercises:
#
# Exercises
# ---------
# **Exercise 1.** ALiBi was designed for models with more heads: with 8 heads its slopes run
# from ``1/2`` to ``1/256``. Would its steepest head be a previous-token head in layer 1 of
# example 10's model? Use the same bound as above.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Not by position alone. With slope ``1/2`` a key one token nearer gets ``exp(1/2)`` times
#    the weight, so the steepest head gives the previous token its largest share: 0.254 with
#    equal content scores, 0.451 at most, with the query's own key at zero weight, averaged
#    like the previous-token score. That is below every trained previous-token head above
#    (0.656 or more); whether it would be enough to form the circuit was not tested, as no
#    8-head ALiBi model was trained here. ALiBi makes heads prefer nearby tokens, not one
#    offset; an ALiBi model (with MLPs and many layers) has to build sharper positional
#    patterns itself:

slopes_8 = alibi_slopes(8)  # (8,)
bias_8 = alibi_bias(8, 20, dtype=torch.float64)  # (8, 20, 20)
blind_8 = positions_only_score(bias_8, without_own_key=False)  # (8,)
ceiling_8 = positions_only_score(bias_8, without_own_key=True)  # (8,)
rows = [
    [head, f"{float(slopes_8[head]):.5f}", f"{blind_8[head]:.3f}", f"{ceiling_8[head]:.3f}"]
    for head in range(8)
]
print(text_table(["head", "slope", "equal content scores", "own key at zero weight"], rows))

# %%
# **Exercise 2.** A checkpoint stores its heads for RoPE in one layout (features ``2i`` and
# ``2i + 1`` rotate together, as in GGUF files) and you run it with the other (features ``i``
# and ``i + head_dim / 2``, as Hugging Face's ``rotate_half`` does). Does the model still run?
# Does it compute the same thing? What fixes it?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    It runs, and computes something else: the same weights rotated in pairs of other features.
#    Reordering each head's query and key rows with
#    :func:`mha_ref.rope_pairing_permutation` makes the two layouts compute the same attention
#    (a dot product does not change when both vectors are permuted the same way):

from mha_ref import rope_pairing_permutation

torch.manual_seed(0)
adjacent = GroupedQueryAttention(
    embed_dim, num_heads, num_heads, dtype=torch.float64,
    rope=RotaryEmbedding(head_dim, 64, pairing="adjacent"),
).eval()
half = GroupedQueryAttention(
    embed_dim, num_heads, num_heads, dtype=torch.float64,
    rope=RotaryEmbedding(head_dim, 64, pairing="half"),
).eval()
half.load_state_dict(adjacent.state_dict())  # the same numbers, read in the other layout
with torch.no_grad():
    wrong = (half(x, is_causal=True)[0] - adjacent(x, is_causal=True)[0]).abs().max()
    perm = rope_pairing_permutation(head_dim)  # (head_dim,)
    for proj in (half.q_proj, half.k_proj):  # each head's rows in the order perm
        reordered = proj.weight.view(num_heads, head_dim, -1)[:, perm]  # (heads, head_dim, E)
        proj.weight.copy_(reordered.reshape_as(proj.weight))
        proj.bias.copy_(proj.bias.view(num_heads, head_dim)[:, perm].reshape_as(proj.bias))
    fixed = (half(x, is_causal=True)[0] - adjacent(x, is_causal=True)[0]).abs().max()
print(f"the other layout, same weights: largest difference {wrong:.3f}")
print(f"after reordering the query and key rows: {fixed:.1e}")

# %%
# .. _ex20-summary:
#
# Summary
# -------
# - Without positions and without a causal mask, attention is permutation-equivariant: it
#   cannot see order. The causal mask alone already breaks that, and a causal layer can count.
# - Learned and sinusoidal positions are added to the input and are absolute; RoPE rotates each
#   head's queries and keys and ALiBi adds a per-head distance penalty: both are relative, the
#   same wherever the sequence starts.
# - In example 10's two-layer model, ALiBi with two heads and no positions at all should not form
#   a previous-token head in layer 1, the head example 10's circuit is built on. Trained to a
#   convergence rule with a 600-step cap, neither did on any of 5 seeds, and neither converged;
#   they learned part of the task another way and were still improving at the cap.
# - Learned, sinusoidal and rotary positions converge and form the circuit on 5 of 5 seeds
#   each (RoPE's runs spread the most, converged at step 240 to 400), and all three fall
#   beyond the trained distances on every converged run: rotary positions do not cure example
#   10's fall. Layer 2's search uses position: run without positions, it falls less on every
#   converged run of the three schemes.
# - RoPE runs sequences longer than in training and keeps most of its accuracy at 30 tokens;
#   sinusoidal positions run them and lose most of it; learned positions cannot run them.
