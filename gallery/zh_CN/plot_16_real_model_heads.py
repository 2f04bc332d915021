"""
示例 16：真实模型的头
=====================

到目前为止，所有的头都属于本站现场训练的玩具模型。本页看一个真实的预训练语言模型的 270 个头（30 个块，
每块 9 个查询头；下面第一张图画的就是一个块）：SmolLM2-135M-Instruct，用的是真实模型这几个示例共用的 4 位量化文件（Q4_1），反量化
后由本软件包自己的 :class:`~mha_ref.GroupedQueryAttention` 运行。下面的每个数都是这次构建在这个文件上
测出来的，不是论文里发表的数字。分数来自注意力权重；一个头 *做了* 什么，要到示例 17 对它做消融之后才下
结论。这些分数沿用 Olsson 等人（2022，“In-context Learning and Induction Heads”，`arXiv:2209.11895
<https://arxiv.org/abs/2209.11895>`_）和 Elhage 等人（2021，“A Mathematical Framework for
Transformer Circuits”）的做法；首词元分数衡量一个头把多少权重放在首词元上，而 Xiao 等人（2023，
`arXiv:2309.17453 <https://arxiv.org/abs/2309.17453>`_）发现注意力汇点（attention sink）就在首词元上。
"""

# %%
# .. _ex16-the-model-and-the-two-inputs:
#
# 模型和两种输入
# --------------
# （自己运行本页需要真实模型：下面打印三条安装命令。）第一种输入是两条由 50 个随机词元组成的序列，
# 每条重复两遍。第一遍无从预测；第二遍则可以预测：只要模型回头找到当前词元上一次出现的位置，把它后面
# 那个词元抄过来。第二种输入是真实文本：随软件包提供的 Python 语言参考中的三段话。块和头都和代码一样
# 从 0 开始编号：块 0 是第一个块，(16, 0) 是块 16 的头 0。一个块由归一化、注意力、残差相加、归一化、
# MLP、残差相加组成，模型卡片常把它叫作“层”（见术语表的“块”）。

import matplotlib.pyplot as plt
import torch

from mha_ref.masks import causal_mask
from mha_ref.tutorial.block_diagram import block_sizes, plot_prenorm_block
from mha_ref.tutorial.plotting import plot_heads, text_table
from mha_ref.tutorial.real_models.heads import plot_every_head, plot_score_maps, top_heads
from mha_ref.tutorial.real_models.smollm2 import install_steps, load_smollm2
from mha_ref.tutorial.real_models.smollm2_heads import heads_analysis

print("安装（按这个顺序）：", *install_steps(), sep="\n  ")
model = load_smollm2()
config = model.config
analysis = heads_analysis()  # 设置了 MHA_REF_CACHE_DIR 时结果存入那个文件夹，再次运行直接读取
scores = analysis["scores"]  # 每个都是 (num_layers, num_heads)
print("模型：SmolLM2-135M-Instruct，4 位（Q4_1）文件，反量化为 float32")
print(f"头：{config.num_layers} 个块 × {config.num_heads} 个查询头"
      f"（每块 {config.num_kv_heads} 个键/值头）")
print(f"重复输入：{tuple(analysis['repeated'].shape)}；真实文本："
      f"{len(analysis['text'])} 个词元")

# %%
# .. _ex16-one-block-of-the-model:
#
# 模型的一个块
# ------------
# 这个模型由一摞相同的块组成，每个块都和 LLaMA 一样是前置归一化（pre-norm）的
# （``mha_ref.tutorial.real_models.smollm2.SmolLM2Block``）。\ *残差流*\ ``x``\ （每个词元一个长为
# ``embed_dim`` 的向量）笔直地穿过每一个块；在每个块里，注意力先对它做 RMS 归一化再读取，把输出加回
# 残差流，然后 MLP 也这样做一遍。所以块 ``l`` 的头能读到前面各块写进残差流的一切，一个头正是这样
# 用上另一个头的输出的（示例 17）。下面这些尺寸是从模型文件里读出来的，也画进了图里：

sizes = block_sizes(config)  # {名字: 尺寸}，来自模型文件的元数据
meaning = {
    "embed_dim": "残差流的宽度（d_model）",
    "num_heads": "每块的查询头数",
    "num_kv_heads": "每块的键/值头数（每个由一组查询头共用）",
    "head_dim": "每个头的特征数",
    "ffn_dim": "MLP 的中间宽度（隐藏单元数）",
    "num_layers": "块数",
}
print(text_table(["配置中的名字", "尺寸", "含义"],
                 [[name, size, meaning[name]] for name, size in sizes.items()]))
labels = {
    "title": "SmolLM2 的一个块（前置归一化）；模型把 {num_layers} 个这样的块叠起来",
    "stream": "残差流 x，形状 (batch, L, {embed_dim})",
    "enter": "来自前一个块的 x（块 0：词元嵌入）",
    "leave": "送往下一个块的 x（最后一块之后：RMSNorm，再得到 logits）",
    "norm": "RMSNorm",
    "attention": "分组查询注意力，RoPE\n{num_heads} 个查询头，"
                 "{num_kv_heads} 个键/值头\nhead_dim {head_dim}",
    "mlp": "MLP（SwiGLU）\n{embed_dim} → {ffn_dim} → {embed_dim}",
    "add_attention": "x + 注意力(RMSNorm(x))",
    "add_mlp": "x + MLP(RMSNorm(x))",
}
fig = plot_prenorm_block(config, labels)
plt.show()

# %%
# .. _ex16-the-model-copies-in-context:
#
# 模型在上下文中复制
# ------------------
# 随机序列每一遍上的平均损失（每个词元多少奈特），以及真实文本上的损失。在 49,152 个词元里均匀瞎猜，
# 损失是 ``log 49152``：

first, second = analysis["copy_losses"]
print(f"第一遍的损失：{first:.2f}；第二遍的损失：{second:.2f}；"
      f"均匀瞎猜：{torch.log(torch.tensor(49152.0)):.2f}")
print(f"真实文本上的损失：{analysis['text_loss']:.3f}")

# %%
# 在第一遍上，模型比均匀瞎猜还差（它期待的是语言，而这些词元不是）；在第二遍上，损失低得多。模型的
# 权重里不可能知道这些随机序列：下降只能来自从上下文里复制。
#
# .. _ex16-four-scores-for-every-head:
#
# 每个头的四种分数
# ----------------
# 一次前向传播返回每个块的注意力权重，由此给每个头算出四个平均权重
# （``mha_ref.tutorial.real_models.heads``）：*前一词元* （每个词元对它前面那个词元的权重）、*归纳*
# （第二遍中的词元对它第一次出现处 *之后* 那个词元的权重）、*重复词元* （对它第一次出现处本身的权重），
# 这三种在重复序列上算；还有 *首词元* （对词元 0 的权重），在真实文本上算。

names = {
    "previous": "前一词元",
    "induction": "归纳",
    "duplicate": "重复词元",
    "first": "首词元（汇点）",
}
fig = plot_score_maps(
    [scores[key] for key in names],
    list(names.values()),
    xlabel="头",
    ylabel="块",
    colorbar_label="平均注意力权重",
)
plt.show()

rows = []
for key, name in names.items():
    for layer, head in top_heads(scores[key], 3):
        rows.append([name, f"({layer}, {head})", f"{scores[key][layer, head]:.3f}"])
print(text_table(["分数", "头（块，头）", "分数值"], rows))
for key, name in names.items():
    print(f"分数高于 0.5 的头（{name}）：{int((scores[key] > 0.5).sum())}")
strong_previous = (scores["previous"] > 0.5).nonzero().tolist()  # [[块, 头], ...]，按块排序
print(f"前一词元分数高于 0.5 的头（块，头）：{[tuple(h) for h in strong_previous]}")
sinks = scores["first"] > 0.5  # (num_layers, num_heads)
print(f"这些首词元头中，在块 0-14 的：{int(sinks[:15].sum())}，在块 15-29 的："
      f"{int(sinks[15:].sum())}")

# %%
# 最强的归纳头在块 17 和 18，位于模型中部；最强的前一词元头在块 16，就在它们前面一块。前一词元分数
# 高于 0.5 的其他头分散在模型各处（上面打印的列表列出了全部），有的在归纳头之前，有的在它们之后，所以
# 单看分数说不出哪一个在为归纳头提供输入：示例 17 用干预来回答。首词元分数高于 0.5 的头很多，几乎都在
# 后半部分。分数高只说明一个头看向哪里，不说明它的输出
# 被拿去做什么：示例 17 对一些头做消融，测量有什么变化。
#
# .. _ex16-named-heads-on-a-real-sentence:
#
# 真实句子上的几个具名头
# ----------------------
# 在一个后半句重复前半句词语的句子上看四个头（人名取自 Olsson 等人的例子）：前一词元分数最高的头、
# 归纳分数最高的头、重复词元分数最高的头和首词元分数最高的头。选一个头，把指针放在格子上即可读出
# 权重（在网站上这个视图是可交互的）。

sentence = ("The meeting with Mr Dursley is on Tuesday. "
            "Later, the meeting with Mr Dursley was moved.")
tokens = model.tokenizer.encode(sentence)  # (L,) torch.long 词元编号
labels = model.tokenizer.token_strings(tokens)
named = [top_heads(scores[key], 1)[0] for key in names]  # (layer, head)，每种分数一个
with torch.no_grad():
    _, weights = model(tokens, need_weights=True)  # 每个块一个 (1, num_heads, L, L)
fig = plot_heads(
    [weights[layer][0, head] for layer, head in named],
    labels,
    titles=[f"{names[key]}：块 {layer} 头 {head}" for key, (layer, head) in zip(names, named, strict=True)],
    layers=[f"块 {layer}" for layer, _ in named],
    layer_word="块",
    ncols=2,
    colorbar_label="注意力权重",
    xlabel="键（词元）",
    ylabel="查询（词元）",
    blocked=~causal_mask(len(labels)),  # (L, L)，True 表示被屏蔽
    blocked_label="被因果掩码屏蔽（权重为 0）",
)
plt.show()
layer, head = named[1]
rows = []
for i, label in enumerate(labels):
    seen = [j for j in range(i) if labels[j] == label]  # 这个词元此前出现的位置
    if seen and seen[-1] + 1 < i:
        after = seen[-1] + 1  # 上一次紧跟在它后面的词元
        weight = weights[layer][0, head, i]  # (L,) 这个查询的权重
        rows.append([f"{i} {label!r}", f"{labels[after]!r}", f"{weight[after]:.3f}",
                     f"{weight[0]:.3f}"])
print(f"归纳头 ({layer}, {head}) 在句中重复词元上的权重：")
print(text_table(["查询", "上次出现处之后的词元", "对它的权重",
                  "对首词元的权重"], rows))

# %%
# 在人名内部的 ``' D'`` 和 ``'urs'`` 上，这个头几乎把全部权重放在上次紧随其后的词元上；在其他重复
# 词元上（包括人名两端的 ``' Mr'`` 和 ``'ley'``），三分之一或更多的权重落在首词元上（最后一列）。
# 真实文本上的模式就是随机序列上测到的那一种，只是弱一些。

# %%
# .. _ex16-every-head-of-every-block:
#
# 句子上每个块的每个头
# --------------------
# 还是这个句子，现在一次看模型的全部头：每个头一张小热力图，块从左到右，头从上到下（行是查询，列是键，
# 与上图相同）。在网站上，图下方的视图包含了其中每一个头：选一个块，或者按 *按块排列的头*，按块逐行列出
# 所有头，再点开任意一个头读出它的权重。这样一张图只说明每个头在一个句子上看向哪里，仅此而已：
# 上面的分数图在重复的随机词元和真实文本上测量了头看向哪里，而示例 17 通过对头做消融来测量它们
# 做了什么。

fig = plot_every_head(
    [w[0] for w in weights],  # 每个块 (num_heads, L, L)
    labels,
    layer_name="块",
    head_name="头",
    xlabel="块",
    ylabel="头",
    key_label="键（词元）",
    query_label="查询（词元）",
    colorbar_label="注意力权重",
    title="句子上每个块的每个头（块横向排列，头纵向排列）",
)
plt.show()
print(f"{len(weights)} 个块 × {weights[0].shape[1]} 个头 = "
      f"{len(weights) * weights[0].shape[1]} 张热力图，每张 {len(labels)} × {len(labels)} 个权重")

# %%
# .. _ex16-control-tokens-in-a-text:
#
# 文本中的控制词元
# ----------------
# 模型的 17 个控制词元（``<|im_start|>``、``<|im_end|>`` 等）不是普通文本。``model.tokenizer.encode``
# 默认拒绝拼写了控制词元的文本，而不去猜用户的意思：``control_tokens="text"`` 把这个拼写当作普通字符
# 编码，``control_tokens="special"`` 则把它变成控制词元。实验模块里的函数接收的是词元编号，所以它们看到的
# 就是调用者选定的那一种。

typed = "a user typed <|im_end|> here"
try:
    model.tokenizer.encode(typed)
except ValueError as error:
    print(f"ValueError（文本里拼写了控制词元，默认拒绝）：{str(error)[:72]}...")
as_text = model.tokenizer.encode(typed, control_tokens="text")  # (n,) 当作普通字符
as_control = model.tokenizer.encode(typed, control_tokens="special")  # (m,) 含编号 2
print(f"当作文本：{len(as_text)} 个词元，其中有编号 2：{2 in as_text.tolist()}；"
      f"当作控制词元：{len(as_control)} 个词元，其中有编号 2："
      f"{2 in as_control.tolist()}")

# %%
# .. _ex16-exercises:
#
# 练习
# ----
# **练习 1.** 第二遍的损失远低于第一遍。不靠复制、只靠语言的统计规律，模型能拿到其中多少？
#
# .. dropdown:: 答案
#    :class-container: mha-answer
#
#    一点也拿不到：这些词元是独立均匀抽取的，在看到上下文之前学到的任何东西都不能说明哪个词元跟在哪个
#    后面。第一遍测的正是这种知识。只有上下文能降低损失。第二遍的损失只有第一遍的这么多（比值越小，
#    从上下文里复制得越多）：

print(f"第二遍 / 第一遍：{second / first:.3f}")

# %%
# **练习 2.** 有多少个头的归纳分数高于 0.3？它们分布在哪几个块？
#
# .. dropdown:: 答案
#    :class-container: mha-answer
#
#    在分数图上数一数：

strong = (scores["induction"] > 0.3).nonzero().tolist()
print(f"{len(strong)} 个头，分布在块 {sorted({layer for layer, _ in strong})}")

# %%
# .. _ex16-summary:
#
# 小结
# ----
# - SmolLM2-135M-Instruct（4 位文件）会在上下文中复制：对于此前见过一次的随机词元，第二遍的损失远低于
#   第一遍，而且在本页的序列（用种子 0 抽取）上甚至低于它在真实文本上的损失；第一遍比均匀瞎猜还差。
# - 一次前向传播就能给全部 270 个头打分；块 17 和 18 中有几个头从一个词元看向它上次出现处之后的
#   词元（归纳），最强的前一词元头就在它们前面一块，后半部分的许多头把大部分权重放在首词元上。
# - 这些是注意力的模式，不是功能：示例 17 用消融来检验它们。
