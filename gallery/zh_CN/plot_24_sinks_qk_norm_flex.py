"""
示例 24：汇点 logit、QK-norm、FlexAttention，以及融合内核不返回的权重
=====================================================================

近来的模型和内核使用注意力的四个方面。**汇点 logit**\\ （gpt-oss）、在 softmax 分母里加 ``1``，以及
PyTorch 的 ``add_zero_attn``，都让一个头可以把权重放在“什么都没有”的地方。**QK-norm**\\ （Dehghani 等
2023）对每个头的查询和键做归一化，从而限制分数的大小。**FlexAttention** 把掩码或偏置写成两个小的
Python 函数；在固定版本的 torch 和 CPU 上，其中一部分能运行，一部分不能。最后，融合内核只返回输出、
不返回注意力权重：这些权重可以 **由它的 log-sum-exp 重建**。
"""

# %%
# .. _ex24-three-ways-to-attend-to-nothing:
#
# 关注“什么都没有”的三种方式及其关系
# ----------------------------------
# :func:`mha_ref.attention_with_sink` 给每个头加一个不属于任何键的 logit：真实键上的权重之和小于 1，
# 缺的那一份读到的值是零。汇点 logit 为 ``0`` 就是 :func:`mha_ref.softmax_plus_one`；
# ``nn.MultiheadAttention(add_zero_attn=True)`` 追加一个全零的键和一个全零的值，它对任何查询的分数
# 都是 ``0``，所以在输出投影之前也是同一回事。下面三项核对用 ``float64`` 打印差值。

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
q, k, v = (torch.randn(2, 3, 6, 4, dtype=torch.float64) for _ in range(3))  # 各为 (batch, num_heads, seq_len, head_dim)
out_zero_sink, w_zero_sink = attention_with_sink(q, k, v, torch.zeros(3, dtype=torch.float64), return_weights=True)
print(f"汇点 logit 0 与 softmax 加一，权重差：{(w_zero_sink - softmax_plus_one(q @ k.transpose(-2, -1) / 2.0)).abs().max().item():.1e}")
plain = attention_with_sink(q, k, v, torch.full((3,), -math.inf, dtype=torch.float64))
print(f"汇点 logit -inf 与普通注意力之差：{(plain - scaled_dot_product_attention(q, k, v)).abs().max().item():.1e}")
mha = MultiHeadAttention(12, 3, bias=False, add_zero_attn=True, batch_first=True, dtype=torch.float64)
x = torch.randn(2, 6, 12, dtype=torch.float64)  # (batch, seq_len, embed_dim)
expected, _ = mha(x, x, x, need_weights=False)  # (2, 6, 12)
heads = [t.unflatten(-1, (3, 4)).transpose(1, 2) for t in torch.nn.functional.linear(x, mha.in_proj_weight).chunk(3, -1)]  # 各为 (2, 3, 6, 4)
rebuilt = mha.out_proj(attention_with_sink(*heads, torch.zeros(3, dtype=torch.float64)).transpose(1, 2).flatten(2))  # (2, 6, 12)
print(f"add_zero_attn 与零汇点 logit 之差：{(rebuilt - expected).abs().max().item():.1e}")
print(f"零汇点时每行留在真实键上的权重：最小 {w_zero_sink.sum(-1).min():.3f}，最大 {w_zero_sink.sum(-1).max():.3f}")

# %%
# .. _ex24-do-they-change-a-head-with-nothing-to-do:
#
# 它们会改变一个无事可做的头的行为吗？
# ------------------------------------
# 一个受控任务（实验代码 ``mha_ref.tutorial.sinks_lab``）：词表大小为 16 的随机词元；在 *触发* 词元
# （id 0-7）处，目标是前一个词元，只有注意力能取到它；在其他词元处，目标是固定的 id 15，单靠残差流
# 就能给出。一层、一个头，每个种子的初始化、数据和 400 步 Adam 都相同；只改 softmax：普通的、带可学习
# 汇点 logit 的、加一的（与上面的 ``add_zero_attn`` 相同）。每种三个种子。训练后在 2048 条固定序列上，
# 表中打印两类位置的准确率、头在那里放在真实键上的权重，以及在非触发位置把头的输出置零时非触发位置的
# 准确率（消融：模型的其余部分在那里需要这个头吗？）。

VARIANTS = {"softmax": "普通 softmax", "sink logit": "汇点 logit", "softmax + 1": "softmax 加一"}  # 打印用的名字
rows, stopped = [], {}
for variant in NO_OP_VARIANTS:
    runs = [no_op_runs(variant, seed) for seed in (0, 1, 2)]
    stopped[variant] = sum(r["mass_other"] < 0.9 for r in runs)
    for seed, r in enumerate(runs):
        rows.append((VARIANTS[variant], seed, f"{r['accuracy_trigger']:.3f}", f"{r['accuracy_other']:.3f}", f"{r['mass_trigger']:.3f}",
                     f"{r['mass_other']:.3f}", f"{r['ablated_other']:.3f}", f"{r['sink_logit']:.2f}"))
print(text_table(["softmax", "种子", "触发处准确率", "其他处准确率", "触发处键上权重", "其他处键上权重",
                  "其他处准确率（头置零）", "汇点 logit"], rows))
for variant, count in stopped.items():
    print(f"{VARIANTS[variant]}：在非触发词元处头放在真实键上的权重低于 0.9 的种子数：{count} / 3")

# %%
# 下面只根据表中的数字来说。在非触发词元处，大多数运行里模型的其余部分几乎不需要这个头（在那里把它的输出
# 置零，准确率损失很小；种子 1 例外，每种 softmax 都是如此），可是无论哪种 softmax，头在那里仍把权重
# 放在真实键上，最后几行数出了这一点。在这个任务里，“关注什么都没有”的途径没有被用上。一个可能的原因
# （这里没有检验）是：头读到一些读出层可以忽略的东西，并不会受到惩罚。带汇点的两种变体在触发词元处
# 确实留下了一小部分权重没有花在键上（权重那一列）。一个惩罚“读取”的任务能否显示出训练好的模型中
# 报告过的行为（Xiao 等 2023），本页没有检验。

# %%
# .. _ex24-qk-norm-and-the-collapsed-one-head-model:
#
# QK-norm 与塌缩的单头模型
# ------------------------
# 在这里的三个种子上，示例 6 的单头模型（``embed_dim = 16``）在较高的学习率下会塌缩（别的种子可能
# 学得会）：它的注意力饱和，每个查询只看一个键，
# 准确率停在很低的水平（见示例 6 的“单头为什么失败”一节）。这里用示例 6 的训练代码
# （:func:`mha_ref.tutorial.training.train` 的循环）最多训练 400 步（准确率达到 0.999 的运行提前
# 停止，见“训练步数”一列），三个种子，注意力由同样的参数
# 显式计算；两组之间唯一的改动是在查询和键上加一个 :class:`mha_ref.QKNorm` （LayerNorm，与
# Dehghani 等 2023 相同），外加这个 LayerNorm 可学习的增益和偏置，第二组也训练它们。两组都先以
# 学习率 ``3e-2`` 训练，再以 ``1e-2`` 训练一遍。表中除准确率外还给出这个头在一个固定探测批次上
# （从位置 2 起的查询）的平均注意力熵，单位是奈特（nats）：每个查询都把全部权重放在一个键上
# （softmax 饱和）时为 0，权重在它能看到的键上均匀分布时最大，最大值也打印在下面。

qk_rows, solved, entropy, max_entropy = [], {}, {}, 0.0
for lr in (3e-2, 1e-2):
    for qk_norm in (False, True):
        runs = [qk_norm_runs(qk_norm, seed, num_heads=1, lr=lr, steps=400, eval_every=25, stop_accuracy=0.999) for seed in (0, 1, 2)]
        solved[lr, qk_norm] = sum(r["accuracy"] >= 0.9 for r in runs)
        entropy[lr, qk_norm] = sum(r["entropy"][0] for r in runs) / len(runs)  # 只有一个头
        max_entropy = runs[0]["max_entropy"]
        for seed, r in enumerate(runs):
            qk_rows.append(("有 QK-norm" if qk_norm else "无 QK-norm", f"{lr:g}", seed, f"{r['accuracy']:.3f}", len(r["loss_curve"]), f"{r['loss_curve'][-1]:.3f}", f"{r['entropy'][0]:.3f}"))
print(text_table(["组", "学习率", "种子", "最终准确率", "训练步数", "最后的训练损失", "注意力熵"], qk_rows))
print(f"注意力熵的最大可能值：{max_entropy:.3f} 奈特")
for lr in (3e-2, 1e-2):
    print(f"学习率 {lr:g}：准确率超过 0.9 的种子数 无 QK-norm {solved[lr, False]} / 3，"
          f"有 QK-norm {solved[lr, True]} / 3；平均注意力熵 {entropy[lr, False]:.3f} "
          f"与 {entropy[lr, True]:.3f} 奈特")

# %%
# 把熵这一列和准确率一起读。熵接近 0 的一次训练，结束时 softmax 已经饱和：每个查询只复制一个
# 键，而经过饱和的 softmax 的梯度接近 0，几乎没有什么能把训练推出这种状态（表中是每次训练结束
# 时的值，不是它何时饱和）。QK-norm 正是为对付这种失败而提出的（Dehghani 等 2023；Wortsman 等
# 2023 用较高的学习率在小规模上复现了它）：把查询和键归一化，logit 就有了上界（LayerNorm 训练
# 出的增益除外），softmax 保持一定的分散。较低的学习率是对照：如果两组在那里也有差别，QK-norm
# 改变的不只是饱和；如果没有差别，``3e-2`` 下的好处与 QK-norm 通过饱和起作用是一致的（每格三个
# 种子；在查询和键上加 LayerNorm 也会改变它们的有效步长，本页没有把两者分开）。最后两行给出本次
# 构建的两组比较：学习率 ``3e-2`` 下，没有 QK-norm 的三个种子准确率都停在很低的水平，注意力熵接近 0
# （softmax 饱和）；有 QK-norm 的三个种子准确率都超过 0.9，熵远离 0。学习率 ``1e-2`` 下，两组的种子都
# 学会了任务，熵也相近。好处只在较高的学习率下出现，这与 QK-norm 通过防止饱和起作用是一致的。

# %%
# .. _ex24-flexattention-against-the-explicit-masks:
#
# FlexAttention 与显式掩码对比
# ----------------------------
# ``torch.nn.attention.flex_attention`` 接受一个 ``mask_mod(b, h, q_idx, kv_idx)``，返回查询能否看到
# 某个键；或者一个 ``score_mod(score, b, h, q_idx, kv_idx)``，修改一个分数。本站的每种掩码都这样写
# 出来，与 :func:`mha_ref.scaled_dot_product_attention` 加显式掩码比较，用 ``float64``，在 CPU 上
# 即时执行（不用 ``torch.compile``）。``mask_mod`` 还要配一个 *块掩码* （``create_block_mask``）：把
# 查询和键组成的网格切成块（这里每块 4 个位置），列出含有允许的查询-键对的块，编译后的内核只计算这些块。
# 每个块掩码都用这次调用的批大小 ``B`` 和头数 ``H`` 构建，它的块（``to_dense()``）与显式掩码的块
# （:func:`~mha_ref.tutorial.sinks_lab.dense_blocks`）比较。然后尝试这个 torch 在这里做不到的反向传播，
# 并打印原因。

flex = None
try:
    from torch.nn.attention import flex_attention as flex
except ImportError as error:
    print(f"跳过 FlexAttention：{error}")


def run_flex(query, key, value, mask_mod=None, score_mod=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 预期会有“未用 torch.compile 调用”的警告
        block_mask = None
        if mask_mod is not None:  # 用这次调用的 B 和 H：mask_mod 可能读取 b 和 h
            block_mask = flex.create_block_mask(mask_mod, query.shape[0], query.shape[1], query.shape[-2], key.shape[-2],
                                                device="cpu", BLOCK_SIZE=FLEX_BLOCK_SIZE)
        out, aux = flex.flex_attention(query, key, value, score_mod=score_mod, block_mask=block_mask,
                                       return_aux=flex.AuxRequest(lse=True))
        return out, aux, block_mask


def blocks_match(block_mask, mask, query):
    if block_mask is None:
        return "-"  # 只有 score_mod：没有块掩码
    full = mask.expand(*query.shape[:-1], mask.shape[-1])  # (batch, num_heads, query_len, key_len)
    return str(torch.equal(block_mask.to_dense().bool(), dense_blocks(full, FLEX_BLOCK_SIZE)))


if flex is not None:
    fq, fk, fv = (torch.randn(2, 2, 12, 8, dtype=torch.float64) for _ in range(3))  # 各为 (batch, num_heads, seq_len, head_dim)
    lengths = torch.tensor([12, 7])
    ids = torch.tensor([0] * 5 + [1] * 4 + [2] * 3)  # 打包在一起的三篇文档
    slopes = alibi_slopes(2).to(torch.float64)  # (2,)
    cases = {
        "因果": (dict(mask_mod=lambda b, h, qi, ki: qi >= ki), causal_mask(12)),
        "填充": (dict(mask_mod=lambda b, h, qi, ki: ki < lengths[b]), padding_mask(lengths)[:, None, None, :]),
        "滑动窗口 4": (dict(mask_mod=lambda b, h, qi, ki: (qi >= ki) & (qi - ki < 4)), sliding_window_mask(12, window=4)),
        "文档 + 因果": (dict(mask_mod=lambda b, h, qi, ki: (ids[qi] == ids[ki]) & (qi >= ki)), document_mask(ids) & causal_mask(12)),
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
    bq = torch.randn(1, 2, 3, 8, dtype=torch.float64)  # (batch, num_heads, new_len, head_dim)：3 个新查询
    bk, bv = torch.randn(1, 2, 10, 8, dtype=torch.float64), torch.randn(1, 2, 10, 8, dtype=torch.float64)  # 10 个键
    out, _, block_mask = run_flex(bq, bk, bv, mask_mod=lambda b, h, qi, ki: ki <= qi + 7)
    bottom_right = causal_mask(3, 10, alignment="bottom_right")  # (3, 10)
    explicit = scaled_dot_product_attention(bq, bk, bv, bottom_right)
    flex_rows.append(("右下角对齐（3 个查询，10 个键）", f"{(out - explicit).abs().max().item():.1e}", "-",
                      blocks_match(block_mask, bottom_right, bq)))
    print(text_table(["掩码", "输出的最大绝对差", "由 Flex 的 LSE 重建的权重与显式权重之差",
                      "块掩码的块 = 显式掩码的块"], flex_rows))
    try:
        run_flex(fq.clone().requires_grad_(True), fk, fv)
        print("CPU 上的 FlexAttention 反向传播：这个 torch 接受（此处未核对）")
    except NotImplementedError as error:
        print(f"跳过 CPU 上的 FlexAttention 反向传播（这个 torch 不支持在 CPU 上对它求梯度）：{str(error).splitlines()[0]}")

# %%
# .. _ex24-a-block-mask-built-for-batch-0-only:
#
# 只为批次 0 构建的块掩码：即时执行与编译
# ---------------------------------------
# 即时执行的 FlexAttention（如上）对每一个查询-键对都调用 ``mask_mod``，并不使用块掩码的块，所以即时
# 执行的检查测不到块掩码。编译之后，它只计算块掩码列出的块，并且只在它标为部分允许的块里调用
# ``mask_mod``：块掩码错了，输出就错。``create_block_mask`` 取 ``B=None`` （或 ``H=None``）时，只用
# ``b = 0`` （``h = 0``）为所有批次（或所有头）构建同一个块掩码；只有当 ``mask_mod`` 不读取 ``b``
# （``h``）时这才是对的。填充掩码读取 ``b``。实验代码
# :func:`~mha_ref.tutorial.sinks_lab.flex_padding_check` 为长度分别为 12 和 7 个词元的两个序列，用这两种
# 方式构建块掩码，再分别用它们运行 FlexAttention，即时执行一次，用 ``torch.compile`` 编译后再运行一次，
# 输入为 ``float32`` （CPU 上编译后的 FlexAttention 不接受 ``float64``），与 ``float64`` 的显式掩码结果
# 比较。编译只做一次，而且用这么小的规模，因为编译要花好几秒 CPU 时间。表中每一行依次给出
# 序列 0 和序列 1 计算的块数，以及与显式结果的最大绝对差。

compile_ok, compile_reason = torch_compile_status("cpu")
print(f"torch.compile：{'可用' if compile_ok else '跳过'}，{compile_reason}")
if flex is not None:
    check = flex_padding_check(compiled=compile_ok)
    computed = check["explicit_blocks"].flatten(1).sum(-1).tolist()  # 每个序列要计算的块数
    padded_rows = [("显式掩码", ", ".join(map(str, computed)), "-", "-", "-")]
    for name, label in (("B=None", "B=None"), ("B=batch", f"B={len(computed)}")):
        r = check[name]
        per_batch = [int(r["blocks"][min(b, len(r["blocks"]) - 1)].sum()) for b in range(len(computed))]
        compiled_diff = ", ".join(f"{d:.1e}" for d in r["compiled"]) if r["compiled"] is not None else "跳过"
        padded_rows.append((label, ", ".join(map(str, per_batch)), str(r["blocks_match"]),
                            ", ".join(f"{d:.1e}" for d in r["eager"]), compiled_diff))
    print(text_table(["块掩码", "块数", "= 显式掩码的", "即时执行：最大差", "编译后：最大差"], padded_rows))

# %%
# 用 ``B=None`` 构建时，块掩码给两个序列用的都是序列 0 的块，所以它的块与显式掩码的块不同。即时执行时，
# 两个块掩码给出的输出都对（即时执行那一列），所以即时执行的检查发现不了这个问题。编译之后，用真实 ``B``
# 构建的块掩码与显式掩码在 ``float32`` 舍入误差内一致，而用 ``B=None`` 构建的那个对序列 1 给出错误的
# 输出（最后一列）：内核给它用的是序列 0 的块。所以：用这次调用的 ``B`` 构建块掩码（``mask_mod`` 读取
# ``h`` 时还要用 ``H``），把 ``block_mask.to_dense()`` 与显式掩码的块比较，并检查编译后的调用。

# %%
# .. _ex24-the-weights-a-fused-kernel-does-not-return:
#
# 融合内核不返回的权重
# --------------------
# 融合内核为每个查询行保存它分数的 log-sum-exp，即由在线 softmax 的累计最大值 ``m`` 和累计和
# ``l`` 得到的 ``lse = m + log l`` （见 :ref:`sphx_glr_auto_examples_plot_13_online_softmax.py`）。权重可由
# 查询、键和每行这一个数得出：``w_ij = exp(s_ij - lse_i)`` （:func:`mha_ref.attention_weights_from_lse`）。
# 上面 FlexAttention 表的各行用的是 Flex 自己的 LSE；这里由 :func:`mha_ref.tiled_attention` 为一个
# 因果、带填充的批次返回 LSE，再把重建的权重与显式权重比较。

lq, lk, lv = (torch.randn(2, 3, 9, 8, dtype=torch.float64) for _ in range(3))  # 各为 (batch, num_heads, seq_len, head_dim)
pad = padding_mask([9, 5])[:, None, None, :]  # (2, 1, 1, 9)
out, lse = tiled_attention(lq, lk, lv, pad, is_causal=True, block_size=4, return_lse=True)  # (2, 3, 9, 8), (2, 3, 9)
explicit_out, explicit_w = scaled_dot_product_attention(lq, lk, lv, pad & causal_mask(9), return_weights=True)
rebuilt_w = attention_weights_from_lse(lq, lk, lse, pad, is_causal=True)  # (2, 3, 9, 9)
print("lse", tuple(lse.shape), "= (batch, num_heads, seq_len)：每个查询行一个数，而不是", tuple(explicit_w.shape))
print(f"分块输出与显式输出之差：{(out - explicit_out).abs().max().item():.1e}；重建权重与显式权重之差：{(rebuilt_w - explicit_w).abs().max().item():.1e}")

# %%
# .. _ex24-exercises:
#
# 练习
# ----
# **练习 1.** 一个头的 ``L`` 个键对某个查询的分数都是 ``0``。汇点 logit 取多少时，这个头恰好把一半
# 权重放在“什么都没有”上？在 ``L = 8`` 时验证。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    真实键在分母中贡献 ``L * e^0 = L``，汇点贡献 ``e^b``；汇点占一半意味着 ``e^b = L``，即
#    ``b = log L``。代码构造了这种情形：

num_keys = 8
zeros_q, zeros_k = torch.zeros(1, 1, 1, 4, dtype=torch.float64), torch.zeros(1, 1, num_keys, 4, dtype=torch.float64)
_, w_half = attention_with_sink(zeros_q, zeros_k, zeros_k, torch.tensor([math.log(num_keys)], dtype=torch.float64), return_weights=True)
print(f"汇点 logit log({num_keys}) = {math.log(num_keys):.3f}：真实键上的权重 {w_half.sum().item():.3f}")

# %%
# **练习 2.** 滑动窗口调用的权重同样可以由它的 LSE 重建。用 :func:`mha_ref.tiled_attention` 对
# 窗口 3 重建权重，并检查每行之和为 1。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    重建时也传入内核用的掩码；被屏蔽的位置权重为零，每个有可见键的行之和为 1：

band = sliding_window_mask(9, window=3)  # (9, 9)
_, band_lse = tiled_attention(lq, lk, lv, band, block_size=4, return_lse=True)  # (2, 3, 9)
band_w = attention_weights_from_lse(lq, lk, band_lse, band)  # (2, 3, 9, 9)
print(f"行和：最小 {band_w.sum(-1).min().item():.6f}，最大 {band_w.sum(-1).max().item():.6f}；带外的权重：{band_w[..., ~band].abs().max().item():.1e}")


# %%
# .. _ex24-summary:
#
# 小结
# ----
# * 汇点 logit 为 ``-inf`` 就是普通注意力，为 ``0`` 就是 softmax 加一，``add_zero_attn`` 在输出投影
#   之前等同于零汇点（开头几行打印了差值）。
# * 在受控任务中，三种 softmax 都没有让不被需要的头停止读取：每个种子的头在非触发词元处仍把权重放在
#   真实键上，所以本页没有显示出这个效果。
# * 在示例 6 的单头模型上，在这里的三个种子上，训练步数上限相同（准确率达到 0.999 的运行提前停止）：
#   学习率 ``3e-2`` 下，没有 QK-norm 的三个种子都没有学会，注意力熵
#   接近 0（softmax 饱和），有 QK-norm 的三个都学会了；学习率 ``1e-2`` 下两组都学会了。
# * FlexAttention 的掩码和分数修改在这台 CPU 上即时执行时与显式计算相等；用这次调用的 ``B`` 和 ``H``
#   构建的块掩码列出的正是显式掩码的块。即时执行的 FlexAttention 不使用块掩码；编译之后，对读取 ``b`` 的
#   ``mask_mod`` 用 ``B=None`` 构建的块掩码给出错误的输出（见上面的打印）。反向传播因打印的原因而跳过。
# * 融合内核的 log-sum-exp 足以精确重建它的权重。
#
# 出处：OpenAI 2025，“gpt-oss-120b & gpt-oss-20b Model Card”，arXiv:2508.10925（汇点 logit）；
# Miller 2023，“Attention Is Off By One”（softmax 加一）；Xiao 等 2023，arXiv:2309.17453；Dehghani 等
# 2023，“Scaling Vision Transformers to 22 Billion Parameters”，arXiv:2302.05442，第 2 节；Wortsman 等
# 2023，“Small-scale proxies for large-scale Transformer training instabilities”，arXiv:2309.14322；
# PyTorch ``torch.nn.attention.flex_attention``；Rabe 与 Staats 2021，“Self-attention Does Not Need
# O(n^2) Memory”，arXiv:2112.05682；Dao 等 2022，arXiv:2205.14135。
