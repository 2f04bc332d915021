"""All attention modules in one namespace.

The classes are defined in ``mha_ref.causal`` (the textbook progression from one causal head to
many), ``mha_ref.multihead`` (the drop-in for ``torch.nn.MultiheadAttention``) and
``mha_ref.grouped`` (grouped-query attention); this module only re-exports them.
"""

from mha_ref.causal import (
    CausalAttention,
    CausalMultiHeadAttention,
    MultiHeadAttentionWrapper,
    wrapper_to_batched,
)
from mha_ref.grouped import GroupedQueryAttention
from mha_ref.multihead import MultiHeadAttention

__all__ = [
    "CausalAttention",
    "MultiHeadAttentionWrapper",
    "CausalMultiHeadAttention",
    "wrapper_to_batched",
    "MultiHeadAttention",
    "GroupedQueryAttention",
]
