"""Reading a GGUF file: its metadata, and its tensors dequantised to float32.

GGUF (llama.cpp's file format) holds a list of key/value metadata fields (the architecture's
sizes, the tokenizer's vocabulary and merges or scores) and a list of tensors, each stored in
its own type: plain ``F32``, or blocks of integers with a scale (``Q8_0``: blocks of 32 eight-bit
integers and a float16 scale; ``Q4_1``: 32 four-bit integers, a scale ``d`` and a minimum ``m``,
the weight being ``d * q + m``; the k-quants ``Q4_K`` and ``Q6_K``: super-blocks of 256 with
scales of their own). ggml-org's ``gguf`` package (gguf-py, pinned to 0.19.0: its reader's API
changed between releases) parses the file and dequantises every type these files use.

**The tokenizer's arrays are read with NumPy, not one element at a time.** ``gguf.GGUFReader``
builds several NumPy views per element of every array field: three per token string. For a
vocabulary of 262,144 tokens (Gemma 3) that is most of the reader's 11.6 s of CPU. Here an
array of numbers is one view of the file, and an array of strings is walked once by its length
prefixes and decoded from one bytes object: the same values (checked equal, item for item, with
the reader's own ``contents()``), the whole read and dequantisation of Gemma 3 in about 4 s.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mha_ref.tutorial.real_models.packages import require_package

__all__ = ["GGUFContents", "read_gguf", "rename_tensors"]


@dataclass
class GGUFContents:
    """What :func:`read_gguf` read from a GGUF file.

    Attributes:
        metadata: every metadata field by its GGUF key (``"llama.block_count"`` -> ``30``);
            strings and numbers as Python values, arrays of strings as lists of ``str``,
            arrays of numbers as 1-D NumPy arrays (``tokenizer.ggml.scores``: ``float32``).
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
        path: the ``.gguf`` file (e.g. :func:`mha_ref.tutorial.real_models.smollm2.model_file`).

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
        reader = _array_reader(gguf)(path)
    except ValueError as error:
        raise ValueError(f"{path} could not be read as a GGUF file: {error}") from error
    metadata = {}
    for key, reader_field in reader.fields.items():
        if key in reader.arrays:
            metadata[key] = reader.arrays[key]
        else:
            value = reader_field.contents()
            metadata[key] = list(value) if isinstance(value, list) else value
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


@functools.cache
def _array_reader(gguf) -> type:
    """``gguf.GGUFReader`` with its flat array fields read whole (made on first use: ``gguf``
    is an optional package)."""
    from gguf.constants import GGUFValueType

    class ArrayReader(gguf.GGUFReader):
        """The reader, except that a flat array of a little-endian file is read whole into
        ``arrays[name]`` and stands in ``fields`` as three views (type, count, all the
        elements' bytes), so the reader's offsets stay right."""

        def __init__(self, path: str | Path) -> None:
            self.arrays: dict[str, Any] = {}  # field name -> its values, read whole
            self._pending = None  # the values of the array field being parsed
            super().__init__(path)

        def _get_field_parts(self, orig_offs: int, raw_type: int):
            if GGUFValueType(raw_type) != GGUFValueType.ARRAY or self.byte_order != "I":
                return super()._get_field_parts(orig_offs, raw_type)
            item_type = self._get(orig_offs, np.uint32)  # (1,)
            count = int(self._get(orig_offs + 4, np.uint64)[0])
            sub_type = GGUFValueType(int(item_type[0]))
            start = orig_offs + 12
            if sub_type == GGUFValueType.STRING:
                values, end = _read_strings(self.data, start, count)
            elif sub_type in self.gguf_scalar_to_np:
                dtype = np.dtype(self.gguf_scalar_to_np[sub_type])
                end = start + dtype.itemsize * count
                values = np.array(self.data[start:end].view(dtype))  # (count,), a copy
            else:  # an array of arrays: the reader's own way
                return super()._get_field_parts(orig_offs, raw_type)
            self._pending = values
            parts = [item_type, self._get(orig_offs + 4, np.uint64), self.data[start:end]]
            return end - orig_offs, parts, [2], [GGUFValueType.ARRAY, sub_type]

        def _push_field(self, reader_field, skip_sum: bool = False) -> int:
            if self._pending is not None:  # the field whose array was just read
                self.arrays[reader_field.name] = self._pending
                self._pending = None
            return super()._push_field(reader_field, skip_sum)

    return ArrayReader


def _read_strings(data: np.ndarray, start: int, count: int) -> tuple[list[str], int]:
    """``count`` GGUF strings (a little-endian uint64 length, then UTF-8 bytes) from ``start``.

    Returns the strings and the offset after the last one.
    """
    buffer = memoryview(data)  # the mapped file, no copy
    unpack = struct.Struct("<Q").unpack_from
    strings, offset = [], start
    for _ in range(count):
        (length,) = unpack(buffer, offset)
        offset += 8
        strings.append(str(buffer[offset : offset + length], "utf-8"))
        offset += length
    return strings, offset


def rename_tensors(
    tensors: dict[str, torch.Tensor],
    num_layers: int,
    block_names: dict[str, str],
    model_name: str,
) -> dict[str, torch.Tensor]:
    """A GGUF file's tensors under a model's parameter names: a ``state_dict``.

    The names every model here shares (``token_embd.weight`` -> ``embedding.weight``,
    ``output_norm.weight`` -> ``final_norm.weight``) and, for each block ``N``, the model's own
    table: ``blk.N.<file name>`` -> ``layers.N.<parameter name>``. The output projection is the
    embedding (tied), so it has no name here.

    Args:
        tensors: :attr:`GGUFContents.tensors`.
        num_layers: blocks in the model.
        block_names: a block's tensor names in the file -> its parameter names in the model.
        model_name: the model, for the error message (``"SmolLM2"``).

    Returns:
        dict[str, torch.Tensor]: parameter name -> tensor, one entry per name in the table.

    Raises:
        ValueError: if a tensor the table names is missing from the file, or the file holds
            one the table does not name (the message gives the first three of each).

    Source:
        the tensor names of llama.cpp's GGUF conversion (``gguf-py``'s ``TensorNameMap``).
    """
    renamed = {"embedding.weight": "token_embd.weight", "final_norm.weight": "output_norm.weight"}
    for layer in range(num_layers):
        for gguf_name, name in block_names.items():
            renamed[f"layers.{layer}.{name}"] = f"blk.{layer}.{gguf_name}"
    missing = sorted(set(renamed.values()) - set(tensors))
    unexpected = sorted(set(tensors) - set(renamed.values()))
    if missing or unexpected:
        raise ValueError(
            f"the file's tensors do not match a {num_layers}-block {model_name}: missing "
            f"{missing[:3]}, unexpected {unexpected[:3]}."
        )
    return {name: tensors[gguf_name] for name, gguf_name in renamed.items()}
