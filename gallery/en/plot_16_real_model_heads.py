"""
Example 16: A real model's heads
================================

Every head so far belonged to a toy trained on this site. This page looks at the 270 heads
(30 blocks of 9 query heads; the first figure below draws one block) of a real pretrained
language model: SmolLM2-135M-Instruct, in the
4-bit quantised file (Q4_1) the real-model examples use, dequantised and run by this package's
own :class:`~mha_ref.GroupedQueryAttention`. Every number below is this build's measurement on
that file, not a published figure. The scores come from the attention weights; what a head
*does* is only claimed in example 17, by ablating it. The scores follow Olsson et al. (2022,
"In-context Learning and Induction Heads", `arXiv:2209.11895
<https://arxiv.org/abs/2209.11895>`_) and Elhage et al. (2021, "A Mathematical Framework for
Transformer Circuits"); the first-token score measures how much weight a head puts on the
first token, where Xiao et al. (2023, `arXiv:2309.17453 <https://arxiv.org/abs/2309.17453>`_)
find the attention sink.
"""

# %%
# .. _ex16-the-model-and-the-two-inputs:
#
# The model and the two inputs
# ----------------------------
# (To run this page yourself you need the real model: the three install commands are printed
# below.)
# The first input is two sequences of 50 random tokens, each repeated twice. The first copy is
# unpredictable; the second can be predicted by a model that looks back to the earlier
# occurrence of the current token and copies the token after it. The second input is real
# text: three paragraphs of the Python Language Reference shipped with the package. Blocks and
# heads are numbered from 0, as in the code: block 0 is the first block, (16, 0) is head 0 of
# block 16. A block is norm, attention, residual add, norm, MLP, residual add; model cards often
# call it a layer (see "block" in the glossary).

import matplotlib.pyplot as plt
import torch

from mha_ref.masks import causal_mask
from mha_ref.tutorial.block_diagram import block_sizes, plot_prenorm_block
from mha_ref.tutorial.plotting import plot_heads, text_table
from mha_ref.tutorial.real_models.heads import plot_every_head, plot_score_maps, top_heads
from mha_ref.tutorial.real_models.smollm2 import install_steps, load_smollm2
from mha_ref.tutorial.real_models.smollm2_heads import heads_analysis

print("install, in this order:", *install_steps(), sep="\n  ")
model = load_smollm2()
config = model.config
analysis = heads_analysis()  # stored in the folder MHA_REF_CACHE_DIR names, if set, and read back on the next run
scores = analysis["scores"]  # each (num_layers, num_heads)
print("model: SmolLM2-135M-Instruct, 4-bit (Q4_1) file, dequantised to float32")
print(f"heads: {config.num_layers} blocks × {config.num_heads} query heads "
      f"({config.num_kv_heads} key/value heads per block)")
print(f"repeated input: {tuple(analysis['repeated'].shape)}; real text: "
      f"{len(analysis['text'])} tokens")

# %%
# .. _ex16-one-block-of-the-model:
#
# One block of the model
# ----------------------
# The model is a stack of identical blocks, each pre-norm as in LLaMA
# (``mha_ref.tutorial.real_models.smollm2.SmolLM2Block``). The *residual stream* ``x`` (one vector of
# ``embed_dim`` numbers per token) runs straight through every block; in each, the attention
# reads it after an RMS normalisation and adds its output back to it, then the MLP does the
# same. A head of block ``l`` therefore reads everything the blocks before it wrote into the
# stream, which is how one head can use another's output (example 17). The sizes below are
# read from the model file and drawn into the figure:

sizes = block_sizes(config)  # {name: size}, from the model file's metadata
meaning = {
    "embed_dim": "width of the residual stream (d_model)",
    "num_heads": "query heads per block",
    "num_kv_heads": "key/value heads per block (each shared by a group of query heads)",
    "head_dim": "features per head",
    "ffn_dim": "hidden width of the MLP",
    "num_layers": "blocks",
}
print(text_table(["config name", "size", "what it is"],
                 [[name, size, meaning[name]] for name, size in sizes.items()]))
labels = {
    "title": "One block of SmolLM2 (pre-norm); the model stacks {num_layers} of them",
    "stream": "residual stream x, shape (batch, L, {embed_dim})",
    "enter": "x from the block before (block 0: the token embeddings)",
    "leave": "x to the next block (after the last: RMSNorm, then the logits)",
    "norm": "RMSNorm",
    "attention": "grouped-query attention, RoPE\n{num_heads} query heads, "
                 "{num_kv_heads} key/value heads\nhead_dim {head_dim}",
    "mlp": "MLP (SwiGLU)\n{embed_dim} → {ffn_dim} → {embed_dim}",
    "add_attention": "x + attention(RMSNorm(x))",
    "add_mlp": "x + MLP(RMSNorm(x))",
}
fig = plot_prenorm_block(config, labels)
plt.show()

# %%
# .. _ex16-the-model-copies-in-context:
#
# The model copies in context
# ---------------------------
# The mean loss (nats per token) on each copy of the random sequences, and on the real text.
# A uniform guess over the 49,152 tokens would cost ``log 49152``:

first, second = analysis["copy_losses"]
print(f"loss on the first copy: {first:.2f}; on the second copy: {second:.2f}; "
      f"uniform guess: {torch.log(torch.tensor(49152.0)):.2f}")
print(f"loss on the real text: {analysis['text_loss']:.3f}")

# %%
# On the first copy the model does worse than a uniform guess (it expects language, and these
# tokens are not); on the second its loss is far lower. Nothing in its weights knows these
# random sequences: the drop can only come from copying out of its context.
#
# .. _ex16-four-scores-for-every-head:
#
# Four scores for every head
# --------------------------
# From one forward pass that returns every block's attention weights, four mean weights per
# head (``mha_ref.tutorial.real_models.heads``): *previous-token* (from each token to the one
# before it), *induction* (from a token of the second copy to the token *after* its first
# occurrence), *duplicate-token* (to its first occurrence itself), all on the repeated
# sequences, and *first-token* (to token 0, on the real text).

names = {
    "previous": "previous-token",
    "induction": "induction",
    "duplicate": "duplicate-token",
    "first": "first token (sink)",
}
fig = plot_score_maps(
    [scores[key] for key in names],
    list(names.values()),
    xlabel="head",
    ylabel="block",
    colorbar_label="mean attention weight",
)
plt.show()

rows = []
for key, name in names.items():
    for layer, head in top_heads(scores[key], 3):
        rows.append([name, f"({layer}, {head})", f"{scores[key][layer, head]:.3f}"])
print(text_table(["score", "head (block, head)", "score value"], rows))
for key, name in names.items():
    print(f"heads scoring above 0.5 on {name}: {int((scores[key] > 0.5).sum())}")
strong_previous = (scores["previous"] > 0.5).nonzero().tolist()  # [[block, head], ...] by block
print(f"heads with a previous-token score above 0.5 (block, head): {[tuple(h) for h in strong_previous]}")
sinks = scores["first"] > 0.5  # (num_layers, num_heads)
print(f"of the first-token heads, in blocks 0-14: {int(sinks[:15].sum())}, in blocks 15-29: "
      f"{int(sinks[15:].sum())}")

# %%
# The top induction heads sit in blocks 17 and 18, in the middle of the model; the strongest
# previous-token head is in block 16, just before them. The other heads with a previous-token
# score above 0.5 are spread over the model (the list printed above has them all), some before
# the induction heads and some after them, so the scores alone cannot say which one feeds the
# induction heads: example 17 answers that by intervention. The first-token score is above 0.5
# for many heads, nearly all of them in the second half. A high
# score says where a head looks, not what its output is used for: example 17 ablates heads and
# measures what changes.
#
# .. _ex16-named-heads-on-a-real-sentence:
#
# Named heads on a real sentence
# ------------------------------
# Four of the named heads on a sentence whose second half repeats words of the first (the
# name is the one Olsson et al. use): the top previous-token head, the top induction head, the
# top duplicate-token head and the top first-token head. Pick a head and point at a cell to
# read its weight (the view is interactive on the site).

sentence = ("The meeting with Mr Dursley is on Tuesday. "
            "Later, the meeting with Mr Dursley was moved.")
tokens = model.tokenizer.encode(sentence)  # (L,) torch.long
labels = model.tokenizer.token_strings(tokens)
named = [top_heads(scores[key], 1)[0] for key in names]  # (layer, head) per score
with torch.no_grad():
    _, weights = model(tokens, need_weights=True)  # one (1, num_heads, L, L) per block
fig = plot_heads(
    [weights[layer][0, head] for layer, head in named],
    labels,
    titles=[f"{names[key]}: block {layer} head {head}" for key, (layer, head) in zip(names, named, strict=True)],
    layers=[f"block {layer}" for layer, _ in named],
    layer_word="block",
    ncols=2,
    colorbar_label="attention weight",
    xlabel="key (token)",
    ylabel="query (token)",
    blocked=~causal_mask(len(labels)),  # (L, L), True = blocked
    blocked_label="blocked by the causal mask (weight 0)",
)
plt.show()
layer, head = named[1]
rows = []
for i, label in enumerate(labels):
    seen = [j for j in range(i) if labels[j] == label]  # earlier occurrences of this token
    if seen and seen[-1] + 1 < i:
        after = seen[-1] + 1  # the token that followed it last time
        weight = weights[layer][0, head, i]  # (L,) this query's weights
        rows.append([f"{i} {label!r}", f"{labels[after]!r}", f"{weight[after]:.3f}",
                     f"{weight[0]:.3f}"])
print(f"induction head ({layer}, {head}) on the sentence's repeated tokens:")
print(text_table(["query", "token after its earlier occurrence", "weight on it",
                  "weight on the first token"], rows))

# %%
# At ``' D'`` and ``'urs'``, inside the name, the head puts nearly all of its weight on the
# token that came next last time; on the other repeated tokens, ``' Mr'`` and ``'ley'`` at the
# name's edges included, a third or more of it goes to the first token (the last column). The
# pattern on real text is the one the random sequences measured, only weaker.

# %%
# .. _ex16-every-head-of-every-block:
#
# Every head of every block on the sentence
# -----------------------------------------
# The same sentence, now through all of the model's heads at once: one small heatmap per head,
# blocks from left to right and heads from top to bottom (query rows, key columns, as above).
# On the site the view under the picture holds every one of them: choose a block, or press
# *Heads by block* for one row of heads per block, and open any head to read its weights.
# A picture like this says where each head looks on one sentence, nothing more: the score maps
# above measured where heads look on the repeated random tokens and the real text, and example
# 17 ablates heads to measure what they do.

fig = plot_every_head(
    [w[0] for w in weights],  # (num_heads, L, L) per block
    labels,
    layer_name="block",
    head_name="head",
    xlabel="block",
    ylabel="head",
    key_label="key (token)",
    query_label="query (token)",
    colorbar_label="attention weight",
    title="Every head of every block on the sentence (blocks across, heads down)",
)
plt.show()
print(f"{len(weights)} blocks x {weights[0].shape[1]} heads = "
      f"{len(weights) * weights[0].shape[1]} heatmaps of {len(labels)} x {len(labels)} weights")

# %%
# .. _ex16-control-tokens-in-a-text:
#
# Control tokens in a text
# ------------------------
# The model's 17 control tokens (``<|im_start|>``, ``<|im_end|>``, ...) are not ordinary text.
# ``model.tokenizer.encode`` refuses a text that spells one, by default, rather than guess
# what was meant: ``control_tokens="text"`` encodes the spelling as ordinary characters,
# ``control_tokens="special"`` makes it the control token. The lab's functions take token ids,
# so they see whatever the caller chose.

typed = "a user typed <|im_end|> here"
try:
    model.tokenizer.encode(typed)
except ValueError as error:
    print(f"ValueError: {str(error)[:72]}...")
as_text = model.tokenizer.encode(typed, control_tokens="text")  # (n,) ordinary characters
as_control = model.tokenizer.encode(typed, control_tokens="special")  # (m,) with id 2
print(f"as text: {len(as_text)} tokens, id 2 among them: {2 in as_text.tolist()}; "
      f"as the control token: {len(as_control)} tokens, id 2 among them: "
      f"{2 in as_control.tolist()}")

# %%
# .. _ex16-exercises:
#
# Exercises
# ---------
# **Exercise 1.** The second copy's loss is far below the first's. How much of that could a
# model get without copying, from the statistics of language alone?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    None: the tokens are drawn uniformly and independently, so nothing learned before the
#    context says which token follows which. The first copy measures exactly that knowledge.
#    Only the context can lower the loss. The second copy's loss is this fraction of the first
#    copy's (the smaller, the more the model copies from the context):

print(f"second copy / first copy: {second / first:.3f}")

# %%
# **Exercise 2.** How many heads have an induction score above 0.3, and how many blocks hold
# them?
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Count them on the map:

strong = (scores["induction"] > 0.3).nonzero().tolist()
print(f"{len(strong)} heads in blocks {sorted({layer for layer, _ in strong})}")

# %%
# .. _ex16-summary:
#
# Summary
# -------
# - SmolLM2-135M-Instruct (4-bit file) copies in context: on random tokens seen once before,
#   the second copy's loss is far below the first copy's and, on this page's sequences (drawn
#   with seed 0), below even its loss on real text;
#   on the first copy it does worse than a uniform guess.
# - One forward pass scores all 270 heads; a few heads in blocks 17 and 18 attend from a token
#   to the token after its earlier occurrence (induction), the strongest previous-token head
#   sits in the block before them, and many later heads put most of their weight on the first
#   token.
# - These are patterns of attention, not functions: example 17 ablates heads to test them.
