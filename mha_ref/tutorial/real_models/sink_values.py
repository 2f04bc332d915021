r"""What a head writes from the first token: its value, and each head's output split in two.

Example 18's measurement of attention sinks (Xiao et al. 2023, arXiv:2309.17453, Sec. 3.1). A
head that puts most of its weight on token 0 adds, after the output projection, its weight on
token 0 times token 0's value through the head's columns of ``W^O``. Whether that is small is a
measurement of two things: the size of token 0's value against the other tokens' values
(:func:`head_values`), and each head's output after ``W^O`` split into the part from token 0
and the part from the other keys (:func:`split_by_first_token`), which add up to the output.
:func:`sink_values_analysis` makes both measurements on the shipped text of examples 16 to 18,
cached beside :mod:`mha_ref.tutorial.real_models.smollm2_heads`' results.

Layers and heads are numbered from 0.
"""

from __future__ import annotations

import torch

from mha_ref.tutorial.cache import cached
from mha_ref.tutorial.real_models.heads import first_token_scores
from mha_ref.tutorial.real_models.smollm2_heads import _arguments, _in_model_threads, _inputs

__all__ = [
    "SINK_COUNT_TEXTS",
    "SINK_COUNT_TOKENS",
    "first_token_scores_by_text",
    "head_values",
    "sink_values_analysis",
    "split_by_first_token",
]

#: the shipped texts on which :func:`first_token_scores_by_text` measures, and how many of
#: their first tokens (about the length of ``"statements"``, the text of examples 16 to 18)
SINK_COUNT_TEXTS = (
    "statements",
    "execution_model",
    "import_statement",
    "try_statement",
    "assignment_statements",
)
SINK_COUNT_TOKENS = 256



def head_values(model, tokens: torch.Tensor) -> torch.Tensor:
    """Every key/value head's values on ``tokens`` (what ``v_proj`` gives, split by head).

    Args:
        model: a loaded ``SmolLM2``.
        tokens: ``(batch, seq_len)`` or ``(seq_len,)`` ids.

    Returns:
        torch.Tensor: ``(num_layers, batch, num_kv_heads, seq_len, head_dim)``, float32.
        SmolLM2's values are not rotated (RoPE turns queries and keys only).

    Raises:
        TypeError, ValueError: from the model's own check of ``tokens`` (as
            :func:`~mha_ref.tutorial.real_models.heads.head_outputs`).

    Source:
        :math:`V W_g^V` of Vaswani et al. 2017, arXiv:1706.03762, Sec. 3.2.2, one per key/value
        head of grouped-query attention (Ainslie et al. 2023, arXiv:2305.13245, Sec. 2.2).
    """
    c = model.config
    captured: dict[int, torch.Tensor] = {}
    handles = []

    def make(layer: int):
        def hook(module, inputs, output):
            captured[layer] = output  # (batch, seq_len, num_kv_heads * head_dim)

        return hook

    try:
        for layer, block in enumerate(model.layers):
            handles.append(block.attention.v_proj.register_forward_hook(make(layer)))
        with torch.no_grad():
            model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(
        [captured[layer].unflatten(-1, (c.num_kv_heads, c.head_dim)).transpose(1, 2)
         for layer in range(c.num_layers)]
    )  # (layers, batch, kv_heads, seq_len, head_dim)


def split_by_first_token(
    weights: torch.Tensor, values: torch.Tensor, out_weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Each head's output after the output projection, split into token 0's part and the rest.

    Head :math:`h` writes at query position :math:`i` the vector
    :math:`o_{h,i} = W^O_h \sum_j a_{h,i,j} v_{g(h),j}`, with :math:`W^O_h` its ``head_dim``
    columns of ``out_proj.weight`` and :math:`g(h)` its key/value head. Token 0's part is
    :math:`a_{h,i,0} W^O_h v_{g(h),0}` (its weight on token 0 times token 0's value through
    its columns of :math:`W^O`), the rest is the sum over :math:`j \ge 1`. The two parts add up
    to :math:`o_{h,i}`, the head's term of ``out_proj`` (SmolLM2's has no bias).

    Args:
        weights: ``(batch, num_heads, seq_len, seq_len)``, one block's attention weights.
        values: ``(batch, num_kv_heads, seq_len, head_dim)``, the same block's values
            (:func:`head_values`); query heads ``g * num_heads // num_kv_heads ..`` read
            key/value head ``g``.
        out_weight: ``(embed_dim, num_heads * head_dim)``, the block's ``out_proj.weight``.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: ``(from_first, from_rest)``, each
        ``(batch, num_heads, seq_len, embed_dim)``, in the inputs' dtype.

    Raises:
        ValueError: if the shapes do not fit together as above (the message names the
            argument and the shape expected).

    Source:
        The head-by-head form of multi-head attention's output,
        :math:`\mathrm{Concat}(\mathrm{head}_1, \dots)W^O = \sum_h \mathrm{head}_h W^O_h`
        (Vaswani et al. 2017, Sec. 3.2.2; Elhage et al. 2021, "A Mathematical Framework for
        Transformer Circuits", the OV circuit), with the sum over keys cut after token 0.
    """
    if weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"split_by_first_token: weights must be (batch, num_heads, seq_len, seq_len), got "
            f"{tuple(weights.shape)}; pass one block's weights of model(tokens, need_weights=True)."
        )
    batch, num_heads, seq_len, _ = weights.shape
    if values.dim() != 4 or values.shape[0] != batch or values.shape[2] != seq_len or (
        num_heads % values.shape[1] != 0
    ):
        raise ValueError(
            f"split_by_first_token: values must be (batch={batch}, num_kv_heads, "
            f"seq_len={seq_len}, head_dim) with num_kv_heads dividing num_heads={num_heads}, got "
            f"{tuple(values.shape)}; pass the same block's head_values(model, tokens)[layer]."
        )
    head_dim = values.shape[-1]
    if out_weight.dim() != 2 or out_weight.shape[1] != num_heads * head_dim:
        raise ValueError(
            f"split_by_first_token: out_weight must be (embed_dim, num_heads * head_dim = "
            f"{num_heads * head_dim}), got {tuple(out_weight.shape)}; pass the same block's "
            f"attention.out_proj.weight."
        )
    group = num_heads // values.shape[1]
    per_head = values.repeat_interleave(group, dim=1)  # (batch, heads, seq_len, head_dim)
    columns = out_weight.unflatten(1, (num_heads, head_dim)).transpose(0, 1)  # (heads, embed, hd)
    written = torch.einsum("hed,bhjd->bhje", columns, per_head)  # (batch, heads, seq_len, embed)
    from_first = weights[..., :1] * written[:, :, :1]  # (batch, heads, seq_len, embed_dim)
    from_rest = weights[..., 1:] @ written[:, :, 1:]  # (batch, heads, seq_len, embed_dim)
    return from_first, from_rest


def sink_values_analysis() -> dict:
    """Example 18's measurement of what the first token's value adds, head by head.

    On the shipped text ``"statements"`` (examples 16 to 18): the size of token 0's value in
    every key/value head against the other tokens', and the post-``W^O`` output of every head
    split by :func:`split_by_first_token`, averaged over the query positions ``1 .. L - 1``
    (position 0 can read only token 0; the first-token score leaves it out too).

    Returns:
        dict: ``"value_first"`` ``(num_layers, num_kv_heads)``, the norm of token 0's value;
        ``"value_median"`` ``(num_layers, num_kv_heads)``, the median norm of the values of
        tokens ``1 .. L - 1``; ``"output"``, ``"from_first"``, ``"from_rest"``
        ``(num_layers, num_heads)``, the mean norm of the head's output after ``W^O`` and of its
        two parts; ``"weight_first"`` ``(num_layers, num_heads)``, the mean weight on token 0
        (the first-token score of example 16). All float32. Cached as
        :func:`~mha_ref.tutorial.real_models.smollm2_heads.heads_analysis`.

    Raises:
        ModelFileError, ModuleNotFoundError: as
            :func:`~mha_ref.tutorial.real_models.smollm2_heads.heads_analysis`.

    Source:
        Xiao et al. 2023, arXiv:2309.17453, Sec. 3.1 (sinks); the split of
        :func:`split_by_first_token`.
    """
    return cached("smollm2_sink_values", _arguments(), _in_model_threads(_sink_values))


def _sink_values() -> dict:
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2

    model = load_smollm2("cpu")
    _, text = _inputs(model)
    values = head_values(model, text)  # (layers, 1, kv_heads, L, head_dim)
    with torch.no_grad():
        _, weights = model(text, need_weights=True)  # layers x (1, heads, L, L)
    value_norms = values[:, 0].norm(dim=-1)  # (layers, kv_heads, L)
    parts = {"output": [], "from_first": [], "from_rest": []}
    for layer, block in enumerate(model.layers):
        first, rest = split_by_first_token(
            weights[layer], values[layer], block.attention.out_proj.weight.detach()
        )  # each (1, heads, L, embed_dim)
        for name, part in (("output", first + rest), ("from_first", first), ("from_rest", rest)):
            parts[name].append(part[0, :, 1:].norm(dim=-1).mean(dim=-1))  # (heads,)
    return {
        "value_first": value_norms[..., 0],  # (layers, kv_heads)
        "value_median": value_norms[..., 1:].median(dim=-1).values,  # (layers, kv_heads)
        **{name: torch.stack(rows) for name, rows in parts.items()},  # each (layers, heads)
        "weight_first": torch.stack([first_token_scores(w) for w in weights]),  # (layers, heads)
    }


def first_token_scores_by_text() -> dict[str, torch.Tensor]:
    """Every head's first-token score on each of :data:`SINK_COUNT_TEXTS` (their first
    ``SINK_COUNT_TOKENS`` = 256 tokens, or the whole text if shorter): whether a head is a sink
    on one text or on every text.

    Returns:
        dict[str, torch.Tensor]: text name -> ``(num_layers, num_heads)`` float32, the mean
        attention weight on token 0 over the query positions ``1 .. L - 1``
        (:func:`~mha_ref.tutorial.real_models.heads.first_token_scores`), in ``[0, 1]``. Cached as
        :func:`~mha_ref.tutorial.real_models.smollm2_heads.heads_analysis`, keyed by the texts'
        SHA-256 too.

    Raises:
        ModelFileError, ModuleNotFoundError: as
            :func:`~mha_ref.tutorial.real_models.smollm2_heads.heads_analysis`.

    Source:
        Xiao et al. 2023, arXiv:2309.17453, Sec. 3.1 (the attention sink), measured per text.
    """
    from mha_ref.tutorial.real_models.texts import text_sha256

    arguments = _arguments(texts=[text_sha256(name) for name in SINK_COUNT_TEXTS],
                           max_tokens=SINK_COUNT_TOKENS)
    return cached("smollm2_first_token_by_text", arguments,
                  _in_model_threads(_first_token_scores_by_text))


def _first_token_scores_by_text() -> dict[str, torch.Tensor]:
    from mha_ref.tutorial.real_models.smollm2 import load_smollm2
    from mha_ref.tutorial.real_models.texts import real_text

    model = load_smollm2("cpu")
    scores = {}
    with torch.no_grad():
        for name in SINK_COUNT_TEXTS:
            tokens = model.tokenizer.encode(real_text(name))[:SINK_COUNT_TOKENS]  # (L,)
            _, weights = model(tokens, need_weights=True)  # layers x (1, heads, L, L)
            scores[name] = torch.stack([first_token_scores(w) for w in weights])  # (layers, heads)
    return scores
