r"""A KV cache of fixed size for sliding-window attention: a ring buffer over the last tokens.

With a sliding window of ``window`` keys (see ``mha_ref.sliding_window_mask``), a decoding
token never looks further back than ``window - 1`` positions, so the cache never needs more than
``window`` keys and values per head. Memory stays constant however long the text, and one decode
step costs ``O(window)`` instead of ``O(position)``.

**Eviction rule.** The token at position ``p`` is written to slot ``p % window``, overwriting the
token at position ``p - window``: the oldest one held, and the first one the window no longer
reaches. With ``num_sinks`` first tokens kept for good, those take slots ``0 .. num_sinks - 1``
and are never overwritten, and every later token goes to slot
``num_sinks + (p - num_sinks) % window`` of the ring. This is StreamingLLM's eviction rule
(Xiao et al. 2023): models put much of their attention on the first tokens, and evicting them
hurts.

**Positions are not renumbered.** The cache stores keys as it is given them: a model with RoPE
rotates each key at its own position in the text before appending it (as
``GroupedQueryAttention`` does for its ``KVCache``), and the ``positions`` property reports the
position in the text of the token in each slot. Attention does not care about the order of the
keys it sums over, so the ring's slot order is harmless, and decoding equals full attention with
the sliding-window mask. It is not the whole of StreamingLLM's cache: StreamingLLM also numbers
the positions within the cache (``0, 1, 2, ...`` over the tokens it holds, in text order; Sec.
3.2), which is what lets it decode past the model's pre-training length; here positions keep
growing with the text.
"""

from __future__ import annotations

import torch

from mha_ref import _validation as check
from mha_ref.masks import _require_window

__all__ = ["RollingKVCache"]


class RollingKVCache:
    """Key/value buffers of ``num_sinks + window`` slots; the ``window`` part is a ring buffer.

    Decode one token at a time: ``keys, values = cache.append(key, value)`` stores the new
    token's key and value and returns every token still visible, the first ``num_sinks`` tokens
    and the last ``window`` ones (the new one included). Attending to them without a mask is
    exactly full attention with the mask
    ``sliding_window_mask(n, window=window)`` (``num_sinks=0``), or that mask with the first
    ``num_sinks`` columns allowed too (StreamingLLM); the tests check both, step by step.

    Eviction: once the ``num_sinks + window`` slots are full, the new token overwrites the
    token ``window`` positions before it (slot :meth:`slot_of`); the first ``num_sinks`` tokens
    are never overwritten. Positions are not renumbered: the keys are stored as given (rotated
    at their own positions by a model with RoPE), and ``positions`` gives each slot's position
    in the text, where StreamingLLM numbers positions within the cache (Sec. 3.2).

    Args:
        batch: Number of sequences decoded together.
        num_kv_heads: Key/value heads of the attention layer.
        window: Recent tokens kept (the newest included), as in ``sliding_window_mask``.
        head_dim: Features per head.
        num_sinks: Keyword-only. First tokens kept for good (StreamingLLM's "attention sinks").
            Default: ``0``.
        device: Device of the buffers.
        dtype: Dtype of the buffers. Default: the default dtype.

    Shape:
        - ``keys``, ``values`` (properties): ``(batch, num_kv_heads, visible, head_dim)`` with
          ``visible = min(seen, num_sinks + window)``, in slot order (not position order).
        - ``positions`` (property): ``(visible,)``, the position of the token in each slot.

    Raises:
        TypeError: If a size is not an int.
        ValueError: If ``batch``, ``num_kv_heads``, ``head_dim`` or ``window`` is not positive,
            or ``num_sinks`` is negative.

    Source:
        Jiang et al. 2023, "Mistral 7B", arXiv:2310.06825, Sec. 2 (rolling buffer cache);
        Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks",
        arXiv:2309.17453, Sec. 3.2 (keeping the first tokens).
    """

    def __init__(
        self,
        batch: int,
        num_kv_heads: int,
        window: int,
        head_dim: int,
        *,
        num_sinks: int = 0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        check.require_positive_int("batch", batch, "number of sequences")
        check.require_positive_int("num_kv_heads", num_kv_heads, "number of key/value heads")
        _require_window(window)
        check.require_positive_int("head_dim", head_dim, "features per head")
        check.require_non_negative_int("num_sinks", num_sinks, "first tokens kept for good")
        self.window = window
        self.num_sinks = num_sinks
        shape = (batch, num_kv_heads, num_sinks + window, head_dim)
        self._keys = torch.zeros(shape, device=device, dtype=dtype)  # (batch, kv, slots, hd)
        self._values = torch.zeros(shape, device=device, dtype=dtype)  # (batch, kv, slots, hd)
        self._positions = torch.full((num_sinks + window,), -1, device=device)  # (slots,)
        self.seen = 0  # tokens appended so far; the next one has position ``seen``

    @property
    def num_slots(self) -> int:
        """The most tokens the cache ever holds, ``num_sinks + window``."""
        return self._keys.shape[2]

    @property
    def visible(self) -> int:
        """The number of tokens currently held, ``min(seen, num_slots)``."""
        return min(self.seen, self.num_slots)

    @property
    def keys(self) -> torch.Tensor:
        """Cached keys ``(batch, num_kv_heads, visible, head_dim)``, in slot order."""
        return self._keys[:, :, : self.visible]  # (batch, num_kv_heads, visible, head_dim)

    @property
    def values(self) -> torch.Tensor:
        """Cached values ``(batch, num_kv_heads, visible, head_dim)``, in slot order."""
        return self._values[:, :, : self.visible]  # (batch, num_kv_heads, visible, head_dim)

    @property
    def positions(self) -> torch.Tensor:
        """Position of the token held in each visible slot, ``(visible,)``, ``torch.long``."""
        return self._positions[: self.visible]  # (visible,)

    def nbytes(self) -> int:
        """Bytes of the two buffers: constant, whatever the number of tokens decoded."""
        return 2 * self._keys.numel() * self._keys.element_size()

    def slot_of(self, position: int) -> int:
        """The slot that the token at ``position`` is written to.

        Math: ``position`` for the first ``num_sinks`` tokens, then
        ``num_sinks + (position - num_sinks) % window``.
        """
        if position < self.num_sinks:
            return position
        return self.num_sinks + (position - self.num_sinks) % self.window

    def append(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store one new token's key and value (overwriting the oldest if full); return all held.

        Args:
            key: Key of the new token.
            value: Value of the new token.

        Shape:
            - key, value: ``(batch, num_kv_heads, 1, head_dim)``.
            - Output: two views ``(batch, num_kv_heads, visible, head_dim)``.

        Returns:
            tuple[torch.Tensor, torch.Tensor]: ``(keys, values)`` of every token held.

        Raises:
            TypeError: If ``key`` or ``value`` is not a tensor or has another dtype.
            ValueError: If the shape does not fit the cache (one token at a time) or the
                device differs.
        """
        for name, tensor in (("key", key), ("value", value)):
            check.require_tensor(name, tensor)
            self._check_new(name, tensor)
        slot = self.slot_of(self.seen)
        self._keys[:, :, slot] = key[:, :, 0]  # (batch, num_kv_heads, head_dim)
        self._values[:, :, slot] = value[:, :, 0]  # (batch, num_kv_heads, head_dim)
        self._positions[slot] = self.seen
        self.seen += 1
        return self.keys, self.values

    def _check_new(self, name: str, tensor: torch.Tensor) -> None:
        """Raise unless ``tensor`` is one token of this cache's shape, dtype and device."""
        batch, num_kv_heads, _, head_dim = self._keys.shape
        if tensor.dim() != 4 or tuple(tensor.shape) != (batch, num_kv_heads, 1, head_dim):
            raise ValueError(
                f"{name} must have shape (batch, num_kv_heads, 1, head_dim) = "
                f"({batch}, {num_kv_heads}, 1, {head_dim}), one token, got "
                f"{name}.shape={tuple(tensor.shape)}. A rolling cache is filled one token at a "
                f"time (a longer chunk's first queries would need keys the ring overwrites); "
                f"loop over the tokens, or run the prompt with sliding_window_mask first."
            )
        check.require_matching_dtype(name, tensor, self._keys.dtype)
        check.require_same_device(name, tensor, "the cache", self._keys.device)
