"""
Example 24: Sink logits, QK-norm, FlexAttention and the weights a fused kernel does not return
==============================================================================================

Four pieces of attention as recent models and kernels use it. A **sink logit** (gpt-oss), a
``1`` added to the softmax's denominator, and PyTorch's ``add_zero_attn`` all give a head a way
to put weight on nothing. **QK-norm** (Dehghani et al. 2023) normalises every head's queries
and keys and bounds the scores. **FlexAttention** writes a mask or a bias as two small Python
functions; on the pinned torch and a CPU, some of it runs and some does not. And a fused kernel
returns the output but not the weights: they can be **rebuilt from its log-sum-exp**.
"""

# %%
# .. _ex24-three-ways-to-attend-to-nothing:
#
# Three ways to attend to nothing, and how they relate
# ----------------------------------------------------
# :func:`mha_ref.attention_with_sink` adds one logit per head that belongs to no key: the weights
# over the real keys sum to less than one, and the missing share reads a value of zero. A sink
# logit of ``0`` is :func:`mha_ref.softmax_plus_one`; ``nn.MultiheadAttention(add_zero_attn=True)``
# appends a key and a value of zeros, whose score is ``0`` against every query, so it is the
# same again, before the output projection. The three checks below print the differences in
# ``float64``.

import math
import warnings

import torch

from mha_ref import (
    MultiHeadAttention,
    alibi_bias,
    alibi_slopes,
    attention_weights_from_lse,
    attention_with_sink,
    causal_mask,
    document_mask,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
    softmax_plus_one,
    tiled_attention,
)
from mha_ref.tutorial.bench import torch_compile_status
from mha_ref.tutorial.plotting import text_table
from mha_ref.tutorial.sinks_lab import (
    FLEX_BLOCK_SIZE,
    NO_OP_VARIANTS,
    dense_blocks,
    flex_padding_check,
    no_op_runs,
    qk_norm_runs,
)

torch.manual_seed(0)
q, k, v = (torch.randn(2, 3, 6, 4, dtype=torch.float64) for _ in range(3))  # each (batch, num_heads, seq_len, head_dim)
out_zero_sink, w_zero_sink = attention_with_sink(q, k, v, torch.zeros(3, dtype=torch.float64), return_weights=True)
print(f"sink logit 0 vs softmax plus one, weights: {(w_zero_sink - softmax_plus_one(q @ k.transpose(-2, -1) / 2.0)).abs().max().item():.1e}")
plain = attention_with_sink(q, k, v, torch.full((3,), -math.inf, dtype=torch.float64))
print(f"sink logit -inf vs ordinary attention: {(plain - scaled_dot_product_attention(q, k, v)).abs().max().item():.1e}")
mha = MultiHeadAttention(12, 3, bias=False, add_zero_attn=True, batch_first=True, dtype=torch.float64)
x = torch.randn(2, 6, 12, dtype=torch.float64)  # (batch, seq_len, embed_dim)
expected, _ = mha(x, x, x, need_weights=False)  # (2, 6, 12)
heads = [t.unflatten(-1, (3, 4)).transpose(1, 2) for t in torch.nn.functional.linear(x, mha.in_proj_weight).chunk(3, -1)]  # each (2, 3, 6, 4)
rebuilt = mha.out_proj(attention_with_sink(*heads, torch.zeros(3, dtype=torch.float64)).transpose(1, 2).flatten(2))  # (2, 6, 12)
print(f"add_zero_attn vs a zero sink logit: {(rebuilt - expected).abs().max().item():.1e}")
print(f"weight left on the real keys with a zero sink, per row: min {w_zero_sink.sum(-1).min():.3f}, max {w_zero_sink.sum(-1).max():.3f}")

# %%
# .. _ex24-do-they-change-a-head-with-nothing-to-do:
#
# Do they change what a head with nothing to do does?
# ---------------------------------------------------
# A controlled task (lab code ``mha_ref.tutorial.sinks_lab``): random tokens from a vocabulary of 16;
# at a *trigger* token (ids 0-7) the target is the previous token, which only attention can
# fetch; at any other token the target is the fixed id 15, which the residual stream alone
# gives. One layer, one head, the same initialisation, data and 400 Adam steps per seed; only
# the softmax changes: plain, with a learned sink logit, or plus one (the same as
# ``add_zero_attn``, above). Three seeds each. After training, on 2048 fixed sequences, the
# table prints the accuracy at both kinds of positions, the weight the head puts on real keys
# there, and the non-trigger accuracy when the head's output is set to zero at the non-trigger
# positions (the ablation: does the rest of the model need the head there?).

VARIANTS = {"softmax": "plain softmax", "sink logit": "sink logit", "softmax + 1": "softmax plus one"}  # the names printed
rows, stopped = [], {}
for variant in NO_OP_VARIANTS:
    runs = [no_op_runs(variant, seed) for seed in (0, 1, 2)]
    stopped[variant] = sum(r["mass_other"] < 0.9 for r in runs)
    for seed, r in enumerate(runs):
        rows.append((VARIANTS[variant], seed, f"{r['accuracy_trigger']:.3f}", f"{r['accuracy_other']:.3f}", f"{r['mass_trigger']:.3f}",
                     f"{r['mass_other']:.3f}", f"{r['ablated_other']:.3f}", f"{r['sink_logit']:.2f}"))
print(text_table(["softmax", "seed", "acc. trigger", "acc. other", "weight on keys, trigger", "weight on keys, other",
                  "acc. other, head zeroed there", "sink logit"], rows))
for variant, count in stopped.items():
    print(f"{VARIANTS[variant]}: seeds whose head keeps less than 0.9 of its weight on real keys at non-trigger tokens: {count} of 3")

# %%
# Read the table for what it shows. At the non-trigger tokens the rest of the model hardly needs
# the head in most runs (zeroing its output there costs little accuracy, except in seed 1, with
# every softmax), yet the head keeps its weight on real keys there with every softmax, as the
# last lines count. In this task, the way to attend to nothing was not taken up. A plausible
# reason, not tested here, is that nothing penalises the head for reading something the read-out
# can ignore. The sink variants do leave a small part of the weight unspent at the trigger
# tokens (the weight column). Whether a task that penalises reading would show the behaviour
# reported for trained models (Xiao et al. 2023) is not tested on this page.

# %%
# .. _ex24-qk-norm-and-the-collapsed-one-head-model:
#
# QK-norm and the collapsed one-head model
# ----------------------------------------
# On the three seeds here, example 6's model with one head (``embed_dim = 16``) collapses at a
# higher learning rate (other seeds may learn): its attention saturates, each query looks at one key, and the accuracy stays low (see "Why the
# single head fails" in example 6). Here it is trained by example 6's training code
# (:func:`mha_ref.tutorial.training.train`'s loop) for up to 400 steps (a run stops early once
# its accuracy reaches 0.999; the "steps run" column), three seeds, with the attention
# computed explicitly from the same parameters; the only change between the two arms is a
# :class:`mha_ref.QKNorm` (LayerNorm, as in Dehghani et al. 2023) on the queries and keys, plus
# that LayerNorm's learnable gains and biases, which the second arm trains too. Both arms run at a
# learning rate of ``3e-2`` and again at ``1e-2``. Beside the accuracy, the table gives the head's
# mean attention entropy over a fixed probe batch (queries from position 2 on), in nats: 0 when
# every query puts all its weight on one key (a saturated softmax), at most the printed maximum
# when the weight is spread evenly over the keys it may see.

qk_rows, solved, entropy, max_entropy = [], {}, {}, 0.0
for lr in (3e-2, 1e-2):
    for qk_norm in (False, True):
        runs = [qk_norm_runs(qk_norm, seed, num_heads=1, lr=lr, steps=400, eval_every=25, stop_accuracy=0.999) for seed in (0, 1, 2)]
        solved[lr, qk_norm] = sum(r["accuracy"] >= 0.9 for r in runs)
        entropy[lr, qk_norm] = sum(r["entropy"][0] for r in runs) / len(runs)  # one head
        max_entropy = runs[0]["max_entropy"]
        for seed, r in enumerate(runs):
            qk_rows.append(("with QK-norm" if qk_norm else "without", f"{lr:g}", seed, f"{r['accuracy']:.3f}", len(r["loss_curve"]), f"{r['loss_curve'][-1]:.3f}", f"{r['entropy'][0]:.3f}"))
print(text_table(["arm", "learning rate", "seed", "final accuracy", "steps run", "last training loss", "attention entropy"], qk_rows))
print(f"largest possible attention entropy: {max_entropy:.3f} nats")
for lr in (3e-2, 1e-2):
    print(f"learning rate {lr:g}: seeds above 0.9 accuracy without QK-norm {solved[lr, False]} of 3, "
          f"with QK-norm {solved[lr, True]} of 3; mean attention entropy {entropy[lr, False]:.3f} "
          f"and {entropy[lr, True]:.3f} nats")

# %%
# Read the entropy column with the accuracy. A run whose entropy is near 0 has a softmax that ended
# saturated: each query copies one key, and through a saturated softmax the gradient is near zero,
# so little pushes the run out of it (the table shows the end of each run, not when it saturated).
# That is the failure QK-norm was introduced against (Dehghani et al. 2023; Wortsman et al. 2023
# reproduce it at small scale with a high learning rate): normalising the queries and keys bounds
# the logits (up to the LayerNorm's trained gains), so the softmax keeps a spread. The lower
# learning rate is the control: if the arms differ there too, QK-norm changes more than the
# saturation; if they do not, the benefit at ``3e-2`` is consistent with QK-norm acting through the
# saturation (three seeds per cell; a LayerNorm on the queries and keys also changes their
# effective step size, which this page does not separate). The last two lines give both comparisons
# for this build's runs: at ``3e-2`` the three seeds without QK-norm stay at a low accuracy with
# an attention entropy near 0 (a saturated softmax), and the three with QK-norm all pass 0.9 with
# an entropy well away from 0. At ``1e-2`` both arms learn on every seed, with similar entropies.
# The benefit shows only at the higher rate, which is consistent with QK-norm acting through the
# saturation.

# %%
# .. _ex24-flexattention-against-the-explicit-masks:
#
# FlexAttention against the explicit masks
# ----------------------------------------
# ``torch.nn.attention.flex_attention`` takes a ``mask_mod(b, h, q_idx, kv_idx)`` that returns
# whether a query may see a key, or a ``score_mod(score, b, h, q_idx, kv_idx)`` that changes a
# score. Each of the site's masks is written that way and compared with
# :func:`mha_ref.scaled_dot_product_attention` and the explicit mask, in ``float64``, eagerly
# (without ``torch.compile``) on the CPU. A ``mask_mod`` comes with a *block mask*
# (``create_block_mask``): the grid of queries and keys cut into blocks, here of 4 positions,
# and the list of the blocks that hold an allowed pair, the only ones a compiled kernel
# computes. Each block mask is built with the call's batch size ``B`` and head count ``H``, and
# its blocks (``to_dense()``) are compared with the explicit mask's
# (:func:`~mha_ref.tutorial.sinks_lab.dense_blocks`). Then the backward pass, which this torch
# does not run here, is tried, and the reason printed.

flex = None
try:
    from torch.nn.attention import flex_attention as flex
except ImportError as error:
    print(f"skipped FlexAttention: {error}")


def run_flex(query, key, value, mask_mod=None, score_mod=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the "called without torch.compile" warning is expected
        block_mask = None
        if mask_mod is not None:  # B and H of the call: mask_mod may read b and h
            block_mask = flex.create_block_mask(mask_mod, query.shape[0], query.shape[1], query.shape[-2], key.shape[-2],
                                                device="cpu", BLOCK_SIZE=FLEX_BLOCK_SIZE)
        out, aux = flex.flex_attention(query, key, value, score_mod=score_mod, block_mask=block_mask,
                                       return_aux=flex.AuxRequest(lse=True))
        return out, aux, block_mask


def blocks_match(block_mask, mask, query):
    if block_mask is None:
        return "-"  # a score_mod alone: no block mask
    full = mask.expand(*query.shape[:-1], mask.shape[-1])  # (batch, num_heads, query_len, key_len)
    return str(torch.equal(block_mask.to_dense().bool(), dense_blocks(full, FLEX_BLOCK_SIZE)))


if flex is not None:
    fq, fk, fv = (torch.randn(2, 2, 12, 8, dtype=torch.float64) for _ in range(3))  # each (batch, num_heads, seq_len, head_dim)
    lengths = torch.tensor([12, 7])
    ids = torch.tensor([0] * 5 + [1] * 4 + [2] * 3)  # three packed documents
    slopes = alibi_slopes(2).to(torch.float64)  # (2,)
    cases = {
        "causal": (dict(mask_mod=lambda b, h, qi, ki: qi >= ki), causal_mask(12)),
        "padding": (dict(mask_mod=lambda b, h, qi, ki: ki < lengths[b]), padding_mask(lengths)[:, None, None, :]),
        "sliding window 4": (dict(mask_mod=lambda b, h, qi, ki: (qi >= ki) & (qi - ki < 4)), sliding_window_mask(12, window=4)),
        "document + causal": (dict(mask_mod=lambda b, h, qi, ki: (ids[qi] == ids[ki]) & (qi >= ki)), document_mask(ids) & causal_mask(12)),
        "ALiBi score_mod": (dict(score_mod=lambda s, b, h, qi, ki: torch.where(qi >= ki, s - slopes[h] * (qi - ki), -math.inf)),
                            alibi_bias(2, 12).to(torch.float64).masked_fill(~causal_mask(12), -math.inf)),
    }
    flex_rows = []
    for name, (mods, mask) in cases.items():
        out, aux, block_mask = run_flex(fq, fk, fv, **mods)
        explicit, weights = scaled_dot_product_attention(fq, fk, fv, mask, return_weights=True)
        rebuilt_weights = attention_weights_from_lse(fq, fk, aux.lse.to(torch.float64), mask)
        flex_rows.append((name, f"{(out - explicit).abs().max().item():.1e}", f"{(rebuilt_weights - weights).abs().max().item():.1e}",
                          blocks_match(block_mask, mask, fq)))
    bq = torch.randn(1, 2, 3, 8, dtype=torch.float64)  # (batch, num_heads, new_len, head_dim): 3 new queries
    bk, bv = torch.randn(1, 2, 10, 8, dtype=torch.float64), torch.randn(1, 2, 10, 8, dtype=torch.float64)  # 10 keys
    out, _, block_mask = run_flex(bq, bk, bv, mask_mod=lambda b, h, qi, ki: ki <= qi + 7)
    bottom_right = causal_mask(3, 10, alignment="bottom_right")  # (3, 10)
    explicit = scaled_dot_product_attention(bq, bk, bv, bottom_right)
    flex_rows.append(("bottom-right (3 queries, 10 keys)", f"{(out - explicit).abs().max().item():.1e}", "-",
                      blocks_match(block_mask, bottom_right, bq)))
    print(text_table(["mask", "max abs diff, output", "weights rebuilt from Flex's LSE vs explicit",
                      "block mask's blocks = explicit mask's"], flex_rows))
    try:
        run_flex(fq.clone().requires_grad_(True), fk, fv)
        print("FlexAttention backward on CPU: accepted by this torch (not checked here)")
    except NotImplementedError as error:
        print(f"skipped FlexAttention backward on CPU: {str(error).splitlines()[0]}")

# %%
# .. _ex24-a-block-mask-built-for-batch-0-only:
#
# A block mask built for batch 0 only, eager and compiled
# -------------------------------------------------------
# Eager FlexAttention, as above, applies ``mask_mod`` to every query-key pair and does not use
# the block mask's blocks, so an eager check does not test the block mask. Compiled, it
# computes only the blocks the block mask lists, and calls ``mask_mod`` only in the blocks it
# marks as partly allowed: a wrong block mask gives a wrong output. ``create_block_mask`` with
# ``B=None`` (or ``H=None``) builds one block mask for every batch (or head) from ``b = 0``
# (``h = 0``) alone; that is right only when ``mask_mod`` does not read ``b`` (``h``). The padding
# mask reads ``b``. The lab code
# :func:`~mha_ref.tutorial.sinks_lab.flex_padding_check` builds its block mask both ways for
# two sequences of 12 and 7 tokens and runs FlexAttention with each, eagerly and compiled with
# ``torch.compile``, on ``float32`` inputs (compiled FlexAttention on a CPU does not take
# ``float64``), against the explicit mask in ``float64``. It compiles once, at this
# small size, because compiling takes several seconds of CPU. Each row gives, for sequence 0
# and then sequence 1, the blocks computed and the largest absolute difference from the
# explicit result.

compile_ok, compile_reason = torch_compile_status("cpu")
print(f"torch.compile: {'available' if compile_ok else 'skipped'}, {compile_reason}")
if flex is not None:
    check = flex_padding_check(compiled=compile_ok)
    computed = check["explicit_blocks"].flatten(1).sum(-1).tolist()  # blocks per sequence
    padded_rows = [("explicit mask", ", ".join(map(str, computed)), "-", "-", "-")]
    for name, label in (("B=None", "B=None"), ("B=batch", f"B={len(computed)}")):
        r = check[name]
        per_batch = [int(r["blocks"][min(b, len(r["blocks"]) - 1)].sum()) for b in range(len(computed))]
        compiled_diff = ", ".join(f"{d:.1e}" for d in r["compiled"]) if r["compiled"] is not None else "skipped"
        padded_rows.append((label, ", ".join(map(str, per_batch)), str(r["blocks_match"]),
                            ", ".join(f"{d:.1e}" for d in r["eager"]), compiled_diff))
    print(text_table(["block mask", "blocks", "= explicit's", "eager: max diff", "compiled: max diff"], padded_rows))

# %%
# Built with ``B=None``, the block mask holds sequence 0's blocks for both sequences, so its
# blocks differ from the explicit mask's. Eagerly, both block masks give the right output (the
# eager column), which is why an eager check cannot catch it. Compiled, the block mask built
# with the true ``B`` agrees with the explicit mask to ``float32`` rounding, and the one built
# with ``B=None`` is wrong for sequence 1 (the last column): the kernel used sequence 0's
# blocks for it. So: build block masks with the call's ``B`` (and ``H`` when ``mask_mod`` reads
# ``h``), compare ``block_mask.to_dense()`` with the explicit mask's blocks, and check the
# compiled call.

# %%
# .. _ex24-the-weights-a-fused-kernel-does-not-return:
#
# The weights a fused kernel does not return
# ------------------------------------------
# Fused kernels keep, per query row, the log-sum-exp of its scores, ``lse = m + log l`` from the
# online softmax's running maximum ``m`` and sum ``l`` (see
# :ref:`sphx_glr_auto_examples_plot_13_online_softmax.py`). The weights follow from the queries,
# the keys and that one number per row: ``w_ij = exp(s_ij - lse_i)``
# (:func:`mha_ref.attention_weights_from_lse`). The rows of the FlexAttention table above did
# this with Flex's own LSE; here :func:`mha_ref.tiled_attention` returns its LSE for a causal,
# padded batch, and the rebuilt weights are compared with the explicit ones.

lq, lk, lv = (torch.randn(2, 3, 9, 8, dtype=torch.float64) for _ in range(3))  # each (batch, num_heads, seq_len, head_dim)
pad = padding_mask([9, 5])[:, None, None, :]  # (2, 1, 1, 9)
out, lse = tiled_attention(lq, lk, lv, pad, is_causal=True, block_size=4, return_lse=True)  # (2, 3, 9, 8), (2, 3, 9)
explicit_out, explicit_w = scaled_dot_product_attention(lq, lk, lv, pad & causal_mask(9), return_weights=True)
rebuilt_w = attention_weights_from_lse(lq, lk, lse, pad, is_causal=True)  # (2, 3, 9, 9)
print("lse", tuple(lse.shape), "= (batch, num_heads, seq_len): one number per query row, not", tuple(explicit_w.shape))
print(f"tiled output vs explicit: {(out - explicit_out).abs().max().item():.1e}; rebuilt weights vs explicit: {(rebuilt_w - explicit_w).abs().max().item():.1e}")

# %%
# .. _ex24-exercises:
#
# Exercises
# ---------
# **Exercise 1.** A head's ``L`` keys all score ``0`` against a query. Which sink logit makes the
# head put exactly half of its weight on nothing? Check it for ``L = 8``.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    The real keys get ``L * e^0 = L`` in the denominator and the sink ``e^b``; half on the sink
#    means ``e^b = L``, so ``b = log L``. The code builds that case:

num_keys = 8
zeros_q, zeros_k = torch.zeros(1, 1, 1, 4, dtype=torch.float64), torch.zeros(1, 1, num_keys, 4, dtype=torch.float64)
_, w_half = attention_with_sink(zeros_q, zeros_k, zeros_k, torch.tensor([math.log(num_keys)], dtype=torch.float64), return_weights=True)
print(f"sink logit log({num_keys}) = {math.log(num_keys):.3f}: weight on the real keys {w_half.sum().item():.3f}")

# %%
# **Exercise 2.** The weights of a sliding-window call can be rebuilt from its LSE too. Rebuild
# them for a window of 3 from :func:`mha_ref.tiled_attention` and check each row sums to one.
#
# .. dropdown:: Answer
#    :class-container: mha-answer
#
#    Pass the kernel's mask to the rebuild as well; blocked positions get weight zero and every
#    row with an allowed key sums to one:

band = sliding_window_mask(9, window=3)  # (9, 9)
_, band_lse = tiled_attention(lq, lk, lv, band, block_size=4, return_lse=True)  # (2, 3, 9)
band_w = attention_weights_from_lse(lq, lk, band_lse, band)  # (2, 3, 9, 9)
print(f"row sums: min {band_w.sum(-1).min().item():.6f}, max {band_w.sum(-1).max().item():.6f}; weight outside the band: {band_w[..., ~band].abs().max().item():.1e}")


# %%
# .. _ex24-summary:
#
# Summary
# -------
# * A sink logit of ``-inf`` is ordinary attention, ``0`` is softmax plus one, and
#   ``add_zero_attn`` is the same as a zero sink before the output projection (the first lines
#   print the differences).
# * In the controlled task, no softmax made the unneeded head stop reading: with every seed the
#   head keeps its weight on real keys at the non-trigger tokens, so this page does not show the
#   effect.
# * On example 6's one-head model, on the three seeds here, trained for up to the same number of
#   steps (a run stops early at 0.999 accuracy): at a learning rate of
#   ``3e-2`` none of the three seeds learns without QK-norm, with an attention entropy near 0 (a
#   saturated softmax), and all three learn with it; at ``1e-2`` both arms learn.
# * FlexAttention's masks and score modifications equal the explicit ones on this CPU, eagerly,
#   and the block masks, built with the call's ``B`` and ``H``, list the explicit masks' blocks.
#   Eager FlexAttention does not use the block mask; compiled, a block mask built with
#   ``B=None`` for a ``mask_mod`` that reads ``b`` gives a wrong output (printed above).
#   The backward pass was skipped for the printed reason.
# * A fused kernel's log-sum-exp is enough to rebuild its weights exactly.
#
# Sources: OpenAI 2025, "gpt-oss-120b & gpt-oss-20b Model Card", arXiv:2508.10925 (sink
# logits); Miller 2023, "Attention Is Off By One" (softmax plus one); Xiao et al. 2023,
# arXiv:2309.17453; Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion
# Parameters", arXiv:2302.05442, Sec. 2; Wortsman et al. 2023, "Small-scale proxies for
# large-scale Transformer training instabilities", arXiv:2309.14322; PyTorch
# ``torch.nn.attention.flex_attention``; Rabe & Staats 2021, "Self-attention Does Not Need
# O(n^2) Memory", arXiv:2112.05682; Dao et al. 2022, arXiv:2205.14135.
