"""
示例 10：归纳头，两个必须合作的头
=================================

Transformer 能接续输入里只出现过一次的模式：看到 ``... A B ... A`` 之后，它会预测 ``B``。
Olsson 等人（2022）在“In-context Learning and Induction Heads”
（`arXiv:2209.11895 <https://arxiv.org/abs/2209.11895>`_）中把这种能力追溯到分属两层的两个头
组成的回路：

1. 第 1 层的 **前一词元头** （previous-token head）把“紧挨在前面的是哪个词元”写进每个位置；
2. 第 2 层的 **归纳头** （induction head）寻找这样一个位置：它的 *前一个词元* 正是当前词元——
   也就是当前词元上一次出现之后紧跟着的那个词元——然后把它复制出来作为预测。

单靠其中任何一个头都做不到：第二个头只有借助第一个头写下的信息才能找到要看的键。本页在构建时
当场训练一个具有这一回路所需的两层的模型，然后通过测量注意力权重、逐个关掉头来检验每一条说法。
"""

# %%
# .. _ex10-the-task-a-segment-that-repeats:
#
# 任务：一段以不同间隔重复的片段
# ------------------------------
# 每个序列先是若干无关词元，然后是一段由互不相同的随机词元组成的片段，接着这段片段再原样出现
# 一次。片段的长度（下称 *周期*）因序列而异。这一点很关键：如果周期固定，第 2 层只凭位置
# （“往回看 ``period - 1`` 个词元”）就能找到答案，根本不需要前一词元头；周期变化时，要预测
# 第二份副本，只能靠内容。
#
# 模型在每个位置预测下一个词元；训练和评分只看第二份副本中的位置，因为那里的下一个词元由第一份
# 副本决定。

import matplotlib.pyplot as plt

from mha_ref import causal_mask
from mha_ref.tutorial.induction import accuracy_with_ablation, head_scores
from mha_ref.tutorial.induction_training import train_induction
from mha_ref.tutorial.plotting import plot_heads, text_table
from mha_ref.tutorial.training import plot_loss_curves

TOKEN_NAMES = list("ABCDEFGHIJKLMNOPQRSTUVWX")  # 每个词元编号对应一个名字

result = train_induction(seed=0)
tokens, periods = result.evaluation_batch()  # (512, seq_len), (512,)
config = result.config
print(f"词表：{config['vocab_size']} 个词元，序列长度：{config['seq_len']}")
print(f"周期：{config['min_period']} 到 {config['max_period']} 个词元")
for i in range(3):
    print(f"周期 {int(periods[i]):2d}：", " ".join(TOKEN_NAMES[t] for t in tokens[i].tolist()))

# %%
# .. _ex10-the-model-and-its-loss-curve:
#
# 模型与损失曲线
# --------------
# :class:`~mha_ref.tutorial.induction.AttentionOnlyTransformer` 是 Elhage 等人（2021）使用的
# 简化 Transformer：词元嵌入和位置嵌入，两层因果 :class:`mha_ref.MultiHeadAttention`，每层把
# 自己的输出 *加到* 残差流上，最后是一个线性的反嵌入层。模型没有 MLP，所以除嵌入之外的一切计算
# 都由它的四个头（每层两个）完成。
#
# :func:`~mha_ref.tutorial.induction_training.train_induction` 用 Adam 在单个 CPU 线程上训练它，固定
# 随机种子、使用确定性算子，因此每次构建打印的数字都相同。损失曲线上要看的是：先是一段很长的
# 平台期，模型只能瞎猜；然后损失骤降。Olsson 等人把这次骤降称为 *相变* （phase change）：归纳
# 回路正是在这时形成的。虚线标出训练批次在第二份副本上的准确率（按 20 步平均）首次达到 50% 的那一步。

model = result.model()
phase_change = result.phase_change_step()
print(f"训练步数：{config['steps']}，批大小：{config['batch_size']}")
print(f"损失：第一步 {result.loss_curve[0]:.3f}，最后一步 {result.loss_curve[-1]:.4f}")
print(f"相变（准确率达到 0.5）所在的步数：{phase_change}")
print(f"新序列上第二份副本的准确率：{accuracy_with_ablation(model, tokens, periods):.3f}")

fig = plot_loss_curves(
    {"损失": result.loss_curve},
    title="第二份副本上的训练损失",
    xlabel="训练步数",
    ylabel="交叉熵损失（对数刻度）",
)
fig.axes[0].axvline(phase_change, color="grey", linestyle="--", linewidth=1)
plt.show()

# %%
# .. _ex10-where-the-heads-look:
#
# 各个头看向哪里
# --------------
# 下面的热力图画出四个头在一条新序列上的注意力权重，坐标用它的词元标注（行是查询，列是键；
# 灰色格子被因果掩码屏蔽）。要看的是：
#
# - 第 1 层的 **前一词元头** 把权重放在主对角线下方紧挨着的那条对角线上：每个词元都看向它前面
#   的那个词元；
# - 第 2 层的 **归纳头** 在片段开始重复之前没有一致的条纹（每一行之和仍为 1，权重分散在某些
#   键上），之后画出一条与对角线平行、向回 ``period - 1`` 个键的 *条纹*：第二份副本里的每个查询
#   都看向它上一次出现时紧跟其后的词元，而那正是它要预测的词元。

# sphinx_gallery_thumbnail_number = 2
probe = int((periods >= 8).nonzero()[0, 0])  # 第一条片段较长的序列
labels = [TOKEN_NAMES[t] for t in tokens[probe].tolist()]
with_weights = model(tokens[probe : probe + 1])[1]  # 每层一个 (1, num_heads, seq_len, seq_len)
weights = [w[0, h].detach() for w in with_weights for h in range(w.shape[1])]
fig = plot_heads(
    weights,
    labels,
    titles=[f"层 {layer} 头 {head}" for layer in (1, 2) for head in (0, 1)],
    suptitle=f"一条序列上的注意力权重（周期 {int(periods[probe])}）",
    layers=[f"层 {layer}" for layer in (1, 2) for head in (0, 1)],
    ncols=2,
    colorbar_label="注意力权重",
    xlabel="键（词元）",
    ylabel="查询（词元）",
    blocked=~causal_mask(len(labels)),  # (seq_len, seq_len)，True 表示被屏蔽
    blocked_label="被因果掩码屏蔽（权重为 0）",
)
plt.show()

# %%
# .. _ex10-the-two-scores-over-512-sequences:
#
# 两个分数：在 512 条序列上测量
# -----------------------------
# 一条序列可能误导人，所以我们在整个评估批次上测量每个头：
#
# - **前一词元分数**：一个头在键 ``t - 1`` 上的平均注意力权重，对所有查询取平均；
# - **归纳分数**：在当前词元上一次出现之后紧跟的那个词元（键 ``t - period + 1``）上的平均
#   注意力权重，只对第二份副本中的查询取平均。
#
# 一个把权重平均分给所有可见键的头，分数大约是它能看到的键数的倒数。层从 1 开始编号，头从 0
# 开始编号，与上面图中的标题一致。

previous, induction = head_scores(model, tokens, periods)  # 各为 (layers, heads)
rows = [
    [f"层 {layer + 1} 头 {head}", f"{previous[layer, head]:.3f}", f"{induction[layer, head]:.3f}"]
    for layer in range(previous.shape[0])
    for head in range(previous.shape[1])
]
print(text_table(["头", "前一词元分数", "归纳分数"], rows))

# %%
# .. _ex10-switching-heads-off:
#
# 把头关掉
# --------
# 热力图只说明一个头看向哪里，不说明模型是否需要它。所以我们做 *消融*：在输出投影之前把一个头
# 的输出置零（其他头和偏置保持不变），再测一次第二份副本上的准确率。如果回路确实需要两类头，
# 去掉前一词元头必然让它失效，去掉归纳头也一样；而去掉第 1 层的另一个头则不应有影响。第 2 层
# 有两个头；表中分别列出单独去掉每一个和同时去掉两个的结果，因为两个头可能做同一件事、互为备份。

prev_head = int(previous[0].argmax())  # 第 1 层的前一词元头（从 0 开始的编号）
other_head = 1 - prev_head
cases = [
    ("无（完整模型）", []),
    (f"层 1 头 {prev_head}（前一词元头）", [(0, prev_head)]),
    (f"层 1 头 {other_head}（第 1 层的另一个头）", [(0, other_head)]),
    ("层 2 头 0", [(1, 0)]),
    ("层 2 头 1", [(1, 1)]),
    ("层 2 头 0 和头 1", [(1, 0), (1, 1)]),
]
rows = [[name, f"{accuracy_with_ablation(model, tokens, periods, heads):.3f}"] for name, heads in cases]
print(text_table(["消融的头", "第二份副本的准确率"], rows))

# %%
# .. _ex10-what-this-shows:
#
# 这说明了什么
# ------------
# 把两张表放在一起读。这个回路在注意力权重里 *看得见*，在消融里也 *少不了*：没有前一词元头，
# 模型就失去了预测第二份副本的能力，尽管这个头自己从不看向答案，它只是为第 2 层要搜索的键做好
# 准备。第 2 层的两个头是否互相重复，上表同样测了出来：如果单独去掉任何一个都还保留大部分准确率，
# 而同时去掉两个就失效，那它们就是同一个归纳头的两份副本。Olsson 等人认为，这一回路是大语言模型
# 上下文学习能力的主要来源之一。它并不是能完成这个任务的唯一回路（例如，第 1 层的头可以找到当前词元上一次
# 出现的位置并传递这个位置，第 2 层再由这个位置构造查询，借助学到的位置嵌入选中后一个位置的键，
# 即 Q 组合）。本页的消融表明前一词元头是 *必需的*；它们并不能说明第 2 层是通过键还是通过查询
# 用到它。区分这两者的消融——每次只从第 2 层的一路输入中去掉这个头——在
# :ref:`示例 11 <sphx_glr_auto_examples_plot_11_heads_decomposed.py>` 里，那里还有三个种子上的
# Elhage 等人组合分数：K 组合是在那里测出来的。

# %%
# .. _ex10-try-it:
#
# 动手试试：在本页中运行的模型
# ----------------------------
# 这张图下面的交互视图里装着训练好的模型本身：构建本页时，它的参数被写进了页面（数量见下面的输出），
# 页面里的一小段脚本在你的浏览器中，对视图文本框里的序列运行与 ``model(tokens)`` 相同的前向计算，
# 不向外发出任何请求。改一改这条序列：先输入一个片段，再把它输入一遍，然后观察第 2 层的两个头
# （上面的消融表明模型离不开它们）和文本框下面的预测。文本框接受字母 A 到 X，最多 20 个：位置嵌入
# 只有 20 行。图中画的是初始序列；下面几行是模型在这条序列上的预测，页面会重新算出它们。

import torch

from mha_ref.tutorial.live_views import attach_live_model, export_model

live_text = "WVUTSRQPONHEARTHEART"  # 十个无关词元，然后是片段 HEART 两遍
live_tokens = torch.tensor([[TOKEN_NAMES.index(c) for c in live_text]])  # (1, seq_len)
with torch.no_grad():
    live_logits, live_weights = model(live_tokens)  # (1, seq_len, vocab_size)，每层一个 (1, h, L, L)
predicted = live_logits[0].argmax(dim=-1)  # (seq_len,) 每个位置预测的下一个词元
second_copy = range(len(live_text) - 5, len(live_text) - 1)  # 下一个词元已知的那些位置
print("序列：", " ".join(live_text))
print("第二份副本，词元 -> 预测的下一个词元：", "，".join(
    f"{live_text[t]} -> {TOKEN_NAMES[predicted[t]]}" for t in second_copy
))
exported = export_model(model)
print(f"写进页面的参数：{sum(p.numel() for p in model.parameters())} 个 float32 数，"
      f"{len(exported['data']) / 1000:.1f} kB 的 base64 文本")
fig = plot_heads(
    [w[0, h] for w in live_weights for h in range(w.shape[1])],
    list(live_text),
    titles=[f"层 {layer} 头 {head}" for layer in (1, 2) for head in (0, 1)],
    suptitle="在本页中运行的模型：初始序列上各个头的权重",
    layers=[f"层 {layer}" for layer in (1, 2) for head in (0, 1)],
    ncols=2,
    colorbar_label="注意力权重",
    xlabel="键（词元）",
    ylabel="查询（词元）",
    blocked=~causal_mask(len(live_text)),  # (seq_len, seq_len)，True 表示被屏蔽
    blocked_label="被因果掩码屏蔽（权重为 0）",
)
attach_live_model(fig, model, TOKEN_NAMES, initial_layer="层 2")
plt.show()

# %%
# .. _ex10-exercises:
#
# 练习
# ----
# **练习 1.** 在每条评估序列里只改动 *第一份* 副本中的一个词元：把片段的第三个词元换成一个在整条
# 序列里别处都没有出现过的词元。第二份副本保持原样，所以在第二份副本的第二个词元处，序列本身接下来
# 仍是原来的第三个词元。模型在那里会预测哪个词元：原来的那个、新换上的那个，还是别的？请根据两个头
# 各自的作用来推理。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    在这个查询处，当前词元是片段的第二个词元。前一词元头仍会把“我前面的词元是片段的第二个词元”
#    写进第一份副本中被改动的那个位置，因为它前面的词元没有变；归纳头凭这个键找到那个位置，复制
#    那里的词元，也就是新换上的词元。模型预测的是上一次出现之后紧跟的词元，不管它是什么，而不是
#    “本该”出现的词元。下面先给出一条序列改动前后的样子和模型在该查询处的预测，再给出在所有序列
#    上的比例：

import torch

batch_index = torch.arange(len(tokens))  # (N,)
start = config["seq_len"] - 2 * periods  # (N,) 第一份副本的起始位置
present = torch.zeros(len(tokens), config["vocab_size"], dtype=torch.bool)  # (N, vocab_size)
present[batch_index[:, None], tokens] = True
new_token = (~present).int().argmax(dim=1)  # (N,) 序列中没有出现的最小词元编号
edited = tokens.clone()  # (N, seq_len)
edited[batch_index, start + 2] = new_token  # 只改第一份副本中片段的第三个词元
query = config["seq_len"] - periods + 1  # (N,) 第二份副本中片段的第二个词元
with torch.no_grad():
    logits, _ = model(edited)  # (N, seq_len, vocab_size)
predicted = logits[batch_index, query].argmax(dim=-1)  # (N,)
print("改动前：", " ".join(TOKEN_NAMES[t] for t in tokens[probe].tolist()))
print("改动后：", " ".join(TOKEN_NAMES[t] for t in edited[probe].tolist()))
print(f"改动后的序列在位置 {int(query[probe])} 处的预测：{TOKEN_NAMES[predicted[probe]]}")
print(f"预测为新词元的比例：{(predicted == new_token).double().mean():.3f}")
print(f"预测为原词元的比例：{(predicted == tokens[batch_index, query + 1]).double().mean():.3f}")

# %%
# **练习 2.** 训练时，两份副本总是紧挨着。把第一份副本往前挪，每次挪两个位置，直到它位于序列
# 开头，中间的空当用无关词元补上，让两份副本越离越远，最后超过任何一条训练序列中的距离。随着空当
# 变大，第二份副本上的准确率会怎样？分别预测完整模型和关掉前一词元头之后的情况。
#
# .. dropdown:: 参考答案
#    :class-container: mha-answer
#
#    理想的归纳头只按内容搜索：“我的词元以前在哪里出现过，它后面跟的是什么？”这种搜索与更早的
#    那份副本离得多远无关，照这样想，准确率不会下降。下面打印的各行却不是这样。在训练中见过的
#    距离上，以及比它们再远一个位置时，完整模型几乎全对；再往后，准确率一行比一行低。从一行到下一行，
#    距离变大，第一份副本的起点也前移（无关词元都不在片段里）。原因由示例 20 测量：它用缩短的训练方案，
#    把这个模型逐一换用五种位置方案重新训练，每种三个种子。原因不在学到的位置嵌入：换成正弦位置，
#    或换成只看距离的旋转位置编码，模型在每个种子上也都会在训练距离之外下降（用两个头的 ALiBi 或不用位置时，
#    它在任何种子上都没有学会这个任务）。三者的共同点是第 2 层在搜索中用到了位置：让它的查询和键不带位置
#    计算，在每个种子上下降都变小了，代价是最短的几个距离上略有损失。训练中两份副本从没有离得更远过，
#    没有什么迫使搜索不管距离，它也就没有不管。这些行能说明的是：它只能稍稍推广到训练时见过的距离之外。最后一列是另一回事：搜索
#    仍要经过前一词元头准备好的键，所以没有这个头，在任何空当下它都会失效。下面的序列周期都相同；
#    最后一行是空当最大时的一条序列，第一份副本位于开头：

from mha_ref.tutorial.induction import make_repeated_batch

period = 5
fixed, fixed_periods = make_repeated_batch(
    512, config["seq_len"], config["vocab_size"], torch.Generator().manual_seed(1), period, period
)  # (512, seq_len), (512,)
first_copy = config["seq_len"] - 2 * period  # 第一份副本的起始位置
rows = []
for gap in range(0, first_copy + 1, 2):
    moved = fixed.clone()  # (512, seq_len)
    block = slice(first_copy - gap, first_copy + period)  # 先是空当处的无关词元，再是第一份副本
    moved[:, block] = fixed[:, block].roll(-gap, dims=1)  # 变成先是第一份副本，再是无关词元
    full = accuracy_with_ablation(model, moved, fixed_periods)
    without = accuracy_with_ablation(model, moved, fixed_periods, [(0, prev_head)])
    rows.append([gap, period + gap, f"{full:.3f}", f"{without:.3f}"])
print(f"周期：{period}；训练中两份副本之间的距离：{config['min_period']} 到 {config['max_period']}")
print(text_table(["空当", "距离", "完整模型", f"去掉层 1 头 {prev_head}"], rows))
print(" ".join(TOKEN_NAMES[t] for t in moved[0].tolist()))

# %%
# .. _ex10-summary:
#
# 小结
# ----
# * 这个回路需要两层：第 1 层的前一词元头把“我前面的词元”写进每个位置，第 2 层的归纳头找到当前词元
#   上一次出现之后的那个位置，并把那里的词元复制出来。
# * 注意力权重显示头看向哪里；消融表明，前一词元头对第二份副本的准确率是必需的，尽管它自己从不看向答案。
# * 第 2 层通过键用到它（K 组合）这一点，是在示例 11 中测量的（组合消融、组合分数和激活修补，三个种子），
#   不在本页。
