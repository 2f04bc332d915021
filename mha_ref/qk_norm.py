r"""QK-norm: normalise every head's queries and keys before the scores.

A score is ``q . k / sqrt(head_dim)``; nothing bounds it, and when the query and key weights grow
during training the logits of some heads grow with them until the softmax is one-hot and the
training diverges ("attention logit growth", Dehghani et al. 2023, Wortsman et al. 2023).
Normalising ``q`` and ``k`` per head (LayerNorm in ViT-22B, RMSNorm in Qwen3 and Gemma 3)
bounds each score by the norms' learned gains: with gains ``g_q`` and ``g_k``,
``|score| <= ||g_q|| * ||g_k|| / sqrt(head_dim) * head_dim`` whatever the weights do. OLMo 2
uses RMSNorm too, but over the queries (and the keys) of all heads together, the whole
projection, before the head split; this module normalises each head, as Qwen3 does.
"""

from __future__ import annotations

import torch
from torch import nn

from mha_ref import _validation as check

__all__ = ["QKNorm"]

#: the two normalisations used by published models
NORM_KINDS = ("layer", "rms")


class QKNorm(nn.Module):
    r"""Normalise queries and keys over ``head_dim``, each with its own learned gain.

    Math: :math:`\hat q = \mathrm{Norm}_q(q)`, :math:`\hat k = \mathrm{Norm}_k(k)`, applied
    to every head's vectors after the head split (and before RoPE), as in Qwen3; the gains
    are shared by the heads of a layer. (OLMo 2 also normalises before RoPE, but the queries
    and the keys of all heads together, over the whole projection, before the head split.)
    ``kind="layer"`` is ``nn.LayerNorm`` (ViT-22B), ``kind="rms"`` is ``nn.RMSNorm``.

    Args:
        head_dim: Features per head.
        kind: ``"layer"`` or ``"rms"``. Default: ``"layer"`` (Dehghani et al. 2023).
        eps: Added to the variance. Default: ``1e-6``.
        device: Device of the gains.
        dtype: Dtype of the gains.

    Shape:
        - query: ``(..., num_heads, L, head_dim)``; key: ``(..., num_kv_heads, S, head_dim)``.
        - Output: two tensors of the same shapes and dtypes.

    Raises:
        TypeError: If ``head_dim`` is not an int.
        ValueError: If ``head_dim`` is not positive or ``kind`` is unknown.

    Source:
        Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion Parameters",
        arXiv:2302.05442, Sec. 2 ("QK normalization"); Wortsman et al. 2023, "Small-scale
        proxies for large-scale Transformer training instabilities", arXiv:2309.14322,
        Sec. 3.1.
    """

    def __init__(
        self,
        head_dim: int,
        kind: str = "layer",
        eps: float = 1e-6,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        check.require_positive_int("head_dim", head_dim, "features per head")
        if kind not in NORM_KINDS:
            raise ValueError(
                f"kind must be one of {NORM_KINDS}, got kind={kind!r}. Use 'layer' "
                f"(ViT-22B) or 'rms' (RMSNorm per head, as in Qwen3; OLMo 2 also uses "
                f"RMSNorm, but over all heads together, before the head split)."
            )
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        norm = nn.LayerNorm if kind == "layer" else nn.RMSNorm
        self.head_dim, self.kind = head_dim, kind
        self.query_norm = norm(head_dim, eps=eps, **factory)
        self.key_norm = norm(head_dim, eps=eps, **factory)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, kind={self.kind!r}"

    def forward(
        self, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Normalise ``query`` and ``key`` over their last dimension.

        Raises:
            TypeError: If an input is not a floating-point tensor.
            ValueError: If an input's last dimension is not ``head_dim``.
        """
        for name, tensor in (("query", query), ("key", key)):
            check.require_tensor(name, tensor)
            check.require_floating(name, tensor)
            if tensor.dim() < 1 or tensor.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} must have head_dim={self.head_dim} features in its last dimension, "
                    f"got {name}.shape={tuple(tensor.shape)}. Split the heads first "
                    f"(mha_ref.split_heads)."
                )
        return self.query_norm(query), self.key_norm(key)  # same shapes as query, key
