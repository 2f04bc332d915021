"""Golden values from the published textbook (not produced by this package).

The numbers come from S. Raschka, "Build a Large Language Model (From Scratch)", ch. 3
(rasbt/LLMs-from-scratch, ch03), reproduced in the course notes of seed 003: the six-token
sentence, stacked into a batch of two, through modules built right after
``torch.manual_seed(123)``. They pin the parameter creation order (W_query, W_key, W_value,
then out_proj), the causal mask and the scaling by ``sqrt(keys.shape[-1])``.
"""

from __future__ import annotations

import torch

from mha_ref import CausalMultiHeadAttention, MultiHeadAttentionWrapper

ATOL = 1e-4


def test_wrapper_reproduces_textbook_numbers(textbook_batch):
    torch.manual_seed(123)
    wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
    context_vecs = wrapper(textbook_batch)
    assert context_vecs.shape == (2, 6, 4)
    first_row = torch.tensor([-0.4519, 0.2216, 0.4772, 0.1063])
    last_row = torch.tensor([-0.5299, -0.1081, 0.5077, 0.3493])
    for batch_index in range(2):
        torch.testing.assert_close(context_vecs[batch_index, 0], first_row, atol=ATOL, rtol=0)
        torch.testing.assert_close(context_vecs[batch_index, -1], last_row, atol=ATOL, rtol=0)


def test_wrapper_all_rows_match_textbook(textbook_batch):
    # The full table printed in the course notes (seed 003) for the wrapper.
    expected = torch.tensor(
        [
            [-0.4519, 0.2216, 0.4772, 0.1063],
            [-0.5874, 0.0058, 0.5891, 0.3257],
            [-0.6300, -0.0632, 0.6202, 0.3860],
            [-0.5675, -0.0843, 0.5478, 0.3589],
            [-0.5526, -0.0981, 0.5321, 0.3428],
            [-0.5299, -0.1081, 0.5077, 0.3493],
        ]
    )
    torch.manual_seed(123)
    wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
    context_vecs = wrapper(textbook_batch)
    torch.testing.assert_close(context_vecs[0], expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(context_vecs[1], expected, atol=ATOL, rtol=0)


def test_batched_module_reproduces_textbook_numbers(textbook_batch):
    torch.manual_seed(123)
    module = CausalMultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
    context_vecs = module(textbook_batch)
    assert context_vecs.shape == (2, 6, 2)
    for batch_index in range(2):
        torch.testing.assert_close(
            context_vecs[batch_index, 0], torch.tensor([0.3190, 0.4858]), atol=ATOL, rtol=0
        )
        torch.testing.assert_close(
            context_vecs[batch_index, -1], torch.tensor([0.2575, 0.4028]), atol=ATOL, rtol=0
        )
