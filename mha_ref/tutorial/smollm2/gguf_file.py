"""Reading the GGUF file: its metadata, and its tensors dequantised to float32.

GGUF (llama.cpp's file format) holds a list of key/value metadata fields (the architecture's
sizes, the tokenizer's vocabulary and merges) and a list of tensors, each stored in its own
type. In this file the linear layers are ``Q4_1`` (blocks of 32 weights: a float16 scale
``d``, a float16 minimum ``m`` and 32 four-bit integers ``q``, the weight being ``d * q + m``),
the token embedding is ``Q8_0`` (blocks of 32: a float16 scale and 32 eight-bit integers) and
the norms' weights are plain float32. ggml-org's ``gguf`` package (gguf-py, pinned to 0.19.0:
its reader's API changed between releases) parses the file and dequantises the blocks.

Cost, measured on one CPU thread: the reader's parsing about 4 s (almost all of it the
49,152 token strings and 48,900 merges of the tokenizer), dequantising the 272 tensors about
2 s; float32 weights take 538 MB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mha_ref.tutorial.smollm2.files import require_package

__all__ = ["GGUFContents", "read_gguf"]

#: metadata fields kept as Python lists (the others are scalars or strings)
_ARRAY_FIELDS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges")


@dataclass
class GGUFContents:
    """What :func:`read_gguf` read from a GGUF file.

    Attributes:
        metadata: every metadata field by its GGUF key (``"llama.block_count"`` -> ``30``);
            strings and numbers as Python values, arrays as lists.
        tensors: every tensor by its GGUF name (``"blk.0.attn_q.weight"``), dequantised to a
            float32 :class:`torch.Tensor` with PyTorch's layout: a linear layer's weight is
            ``(out_features, in_features)``, the embedding ``(vocab_size, embed_dim)``.
        tensor_types: the storage type of each tensor in the file (``"Q4_1"``, ``"Q8_0"``,
            ``"F32"``).
    """

    metadata: dict[str, Any]
    tensors: dict[str, torch.Tensor] = field(repr=False)
    tensor_types: dict[str, str] = field(repr=False)


def read_gguf(path: str | Path) -> GGUFContents:
    """Read a GGUF file's metadata and dequantise all its tensors to float32.

    Args:
        path: the ``.gguf`` file (e.g. :func:`mha_ref.tutorial.smollm2.files.model_file`).

    Shape:
        Each tensor: GGUF lists dimensions fastest-first (``[in_features, out_features]``);
        NumPy and PyTorch list them slowest-first, so a linear layer's weight comes out as
        ``(out_features, in_features)``, ready for :class:`torch.nn.Linear`.

    Returns:
        GGUFContents: metadata, float32 tensors and their storage types.

    Raises:
        ModuleNotFoundError: if the ``gguf`` package is missing (the message gives the
            install command).
        ValueError: if the file is not a GGUF file, or holds a tensor type that ``gguf``
            cannot dequantise.

    Source:
        ggml-org/llama.cpp, ``gguf-py`` 0.19.0: ``gguf.GGUFReader``, ``ReaderField.contents``,
        ``gguf.quants.dequantize``; the GGUF specification (``docs/gguf.md`` in ggml-org/ggml).
    """
    gguf = require_package("gguf")
    try:
        reader = gguf.GGUFReader(path)
    except ValueError as error:
        raise ValueError(f"{path} could not be read as a GGUF file: {error}") from error
    metadata = {}
    for key, reader_field in reader.fields.items():
        value = reader_field.contents()
        metadata[key] = list(value) if key in _ARRAY_FIELDS else value
    tensors, types = {}, {}
    for tensor in reader.tensors:
        try:
            values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)  # (rows, columns)
        except NotImplementedError as error:
            raise ValueError(
                f"tensor {tensor.name} of {path} has type {tensor.tensor_type.name}, which "
                f"the installed gguf package cannot dequantise: {error}"
            ) from error
        rows = np.array(values, dtype=np.float32, copy=True)  # owned, writable, out of the map
        tensors[tensor.name] = torch.from_numpy(rows)
        types[tensor.name] = tensor.tensor_type.name
    return GGUFContents(metadata=metadata, tensors=tensors, tensor_types=types)
