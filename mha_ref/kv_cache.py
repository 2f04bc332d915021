r"""The KV cache: keys and values of the tokens seen so far, kept for the next decode steps.

When a model generates text one token at a time, the keys and values of earlier tokens do not
change (causal attention: a token never looks ahead). Recomputing them at every step would cost
``O(t)`` projections at step ``t``; the cache stores them once and appends one key and one value
per head and per new token. The price is memory, ``2 * num_kv_heads * head_dim`` numbers per
token and layer (see ``kv_cache_bytes_per_token``), which is what grouped-query attention
shrinks.
"""

from __future__ import annotations

import torch

from mha_ref import _validation as check

__all__ = ["KVCache", "kv_cache_bytes_per_token"]


class KVCache:
    """Preallocated key and value buffers for ``max_len`` tokens, filled step by step.

    The buffers are allocated once, ``(batch, num_kv_heads, max_len, head_dim)`` each, as real
    inference engines do (growing a tensor with ``torch.cat`` at every step would copy the whole
    cache each time). ``append`` writes the new tokens after the ``cached_len`` already
    there and returns views of everything cached so far.

    Build one with ``GroupedQueryAttention.new_cache(batch, max_len)``, which takes the head
    counts, device and dtype from the module, and pass it to
    ``GroupedQueryAttention.decode``.

    **Autograd.** Generation runs under ``torch.no_grad()`` or ``torch.inference_mode()``, and
    then the new tokens are written into the buffers in place. When the keys or values being
    appended require gradients (training through several decode steps), writing in place
    would overwrite what the earlier steps saved for their backward pass; the cache then
    writes out of place instead (``Tensor.slice_scatter``: new buffers, one copy of the cache
    per step), so gradients flow back through every step to the keys and values of every
    token. The results are the same either way.

    Args:
        batch: Number of sequences decoded together.
        num_kv_heads: Key/value heads of the attention layer.
        max_len: Largest number of tokens the cache can hold.
        head_dim: Features per head.
        device: Device of the buffers.
        dtype: Dtype of the buffers. Default: the default dtype.

    Shape:
        - ``keys``, ``values`` (properties): ``(batch, num_kv_heads, cached_len, head_dim)``.

    Raises:
        TypeError: If a size is not an int.
        ValueError: If ``batch``, ``num_kv_heads`` or ``head_dim`` is not positive, or
            ``max_len`` is negative.

    Source:
        Pope et al. 2022, "Efficiently Scaling Transformer Inference", arXiv:2211.05102,
        Sec. 2 (the KV cache); Shazeer 2019, arXiv:1911.02150, Sec. 2.4 (incremental decoding).
    """

    def __init__(
        self,
        batch: int,
        num_kv_heads: int,
        max_len: int,
        head_dim: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        check.require_positive_int("batch", batch, "number of sequences")
        check.require_positive_int("num_kv_heads", num_kv_heads, "number of key/value heads")
        check.require_non_negative_int("max_len", max_len, "largest number of cached tokens")
        check.require_positive_int("head_dim", head_dim, "features per head")
        shape = (batch, num_kv_heads, max_len, head_dim)
        self._keys = torch.zeros(shape, device=device, dtype=dtype)  # (batch, kv, max_len, hd)
        self._values = torch.zeros(shape, device=device, dtype=dtype)  # (batch, kv, max_len, hd)
        self.cached_len = 0

    @property
    def max_len(self) -> int:
        """Largest number of tokens the buffers hold."""
        return self._keys.shape[2]

    @property
    def keys(self) -> torch.Tensor:
        """The cached keys, a view ``(batch, num_kv_heads, cached_len, head_dim)``."""
        return self._keys[:, :, : self.cached_len]  # (batch, num_kv_heads, cached_len, head_dim)

    @property
    def values(self) -> torch.Tensor:
        """The cached values, a view ``(batch, num_kv_heads, cached_len, head_dim)``."""
        return self._values[:, :, : self.cached_len]  # (batch, num_kv_heads, cached_len, hd)

    def nbytes(self) -> int:
        """Bytes of the two preallocated buffers (what the cache costs, used or not)."""
        return 2 * self._keys.numel() * self._keys.element_size()

    def append(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the keys and values of ``new_len`` new tokens; return all cached so far.

        Args:
            key: Keys of the new tokens.
            value: Values of the new tokens.

        Shape:
            - key, value: ``(batch, num_kv_heads, new_len, head_dim)``.
            - Output: two views ``(batch, num_kv_heads, cached_len + new_len, head_dim)``.

        Returns:
            tuple[torch.Tensor, torch.Tensor]: ``(keys, values)`` of every cached token.

        Raises:
            TypeError: If ``key`` or ``value`` is not a tensor or has another dtype than the
                cache.
            ValueError: If their shape does not fit the cache, they hold different numbers of
                tokens, they are on another device, or the cache would exceed ``max_len``.
        """
        for name, tensor in (("key", key), ("value", value)):
            check.require_tensor(name, tensor)
            self._check_new(name, tensor)
        fix = "Pass the keys and values of the same new tokens."
        check.require_same_new_tokens("key", key, "value", value, dim=2, fix=fix)
        self._append(key, value)
        return self.keys, self.values

    def _append(self, key: torch.Tensor, value: torch.Tensor) -> None:
        """``append`` on tensors a module built itself (no checks).

        In place, unless autograd records the write (see the class docstring).
        """
        start, stop = self.cached_len, self.cached_len + key.shape[2]
        recorded = torch.is_grad_enabled() and (
            key.requires_grad or value.requires_grad or self._keys.requires_grad
        )
        if recorded:  # earlier steps saved views of the buffers: build new ones
            self._keys = self._keys.slice_scatter(key, dim=2, start=start, end=stop)
            self._values = self._values.slice_scatter(value, dim=2, start=start, end=stop)
        else:
            self._keys[:, :, start:stop] = key  # (batch, num_kv_heads, new_len, head_dim)
            self._values[:, :, start:stop] = value  # (batch, num_kv_heads, new_len, head_dim)
        self.cached_len = stop

    def crop(self, length: int) -> None:
        """Forget every token after the first ``length`` (e.g. to decode again from there).

        Raises:
            ValueError: If ``length`` is negative or more than ``cached_len``.
        """
        check.require_crop_length(length, self.cached_len)
        self.cached_len = length

    def _check_new(self, name: str, tensor: torch.Tensor) -> None:
        """Raise unless ``tensor`` has the cache's batch, heads, head_dim, dtype and device."""
        batch, num_kv_heads, max_len, head_dim = self._keys.shape
        if tensor.dim() != 4 or tensor.shape[:2] != (batch, num_kv_heads) or (
            tensor.shape[3] != head_dim
        ):
            raise ValueError(
                f"{name} must have shape (batch, num_kv_heads, new_len, head_dim) = "
                f"({batch}, {num_kv_heads}, new_len, {head_dim}) to fit this cache, got "
                f"{name}.shape={tuple(tensor.shape)}. Split the heads first, e.g. with "
                f"mha_ref.split_heads."
            )
        check.require_matching_dtype(name, tensor, self._keys.dtype)
        check.require_same_device(name, tensor, "the cache", self._keys.device)
        if self.cached_len + tensor.shape[2] > max_len:
            raise ValueError(
                f"the cache holds {self.cached_len} of at most max_len={max_len} tokens and "
                f"cannot take {tensor.shape[2]} more. Build it with a larger max_len."
            )


def kv_cache_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype = torch.float32
) -> int:
    """Bytes a KV cache needs per token: ``2 * num_layers * num_kv_heads * head_dim * itemsize``.

    Math: one key and one value vector of ``head_dim`` numbers, per key/value head and layer.
    It does not depend on the number of query heads: that is what grouped-query attention
    exploits.

    Args:
        num_layers: Attention layers of the model.
        num_kv_heads: Key/value heads per layer.
        head_dim: Features per head.
        dtype: Element type of the cache. Default: ``torch.float32``.

    Returns:
        int: Bytes per token (multiply by batch size and sequence length for the whole cache).

    Raises:
        TypeError: If a size is not an int or ``dtype`` is not a ``torch.dtype``.
        ValueError: If a size is not positive.

    Source:
        Shazeer 2019, arXiv:1911.02150, Sec. 2.4; Ainslie et al. 2023, arXiv:2305.13245,
        Sec. 2.2.
    """
    check.require_positive_int("num_layers", num_layers, "number of attention layers")
    check.require_positive_int("num_kv_heads", num_kv_heads, "number of key/value heads")
    check.require_positive_int("head_dim", head_dim, "features per head")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype must be a torch.dtype such as torch.float16, got {type(dtype).__name__}."
        )
    itemsize = torch.empty((), dtype=dtype).element_size()
    return 2 * num_layers * num_kv_heads * head_dim * itemsize
