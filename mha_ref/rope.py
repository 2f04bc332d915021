r"""Rotary position embedding (RoPE): each head's queries and keys rotated by their position.

RoPE puts position *inside* attention. After the projections and the head split, the features
of every query and key are taken two at a time, and each pair is rotated by an angle that grows
with the token's position ``p``: pair ``i`` of ``rotary_dim / 2`` turns by
``p * base ** (-2 i / rotary_dim)`` radians. The first pairs turn fast (about one radian per
token), the last ones slowly. A rotation of the query by ``p_q`` and of the key by ``p_k``
leaves their dot product depending on ``p_q - p_k`` alone, so the scores see *relative*
positions, and nothing is added to the token embeddings.

Which features form a pair differs between checkpoints, and a wrong choice gives a model that
runs and writes plausible text but is wrong:

* ``pairing="adjacent"``: features ``(2i, 2i + 1)`` form pair ``i``, as in the RoFormer paper
  (Su et al. 2021, eq. 34), Meta's original LLaMA code and GGUF files (llama.cpp's converter
  permutes the query/key rows of Hugging Face checkpoints into this layout);
* ``pairing="half"``: features ``(i, i + rotary_dim / 2)`` form pair ``i``, as in GPT-NeoX and
  Hugging Face's ``rotate_half``.

Both compute the same attention once the query/key projection rows of each head are permuted
by :func:`rope_pairing_permutation`; the tests check it.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from mha_ref import _validation as check

__all__ = ["RotaryEmbedding", "apply_rotary", "rope_pairing_permutation", "rotary_frequencies"]

#: the two feature layouts of real checkpoints
PAIRINGS = ("adjacent", "half")


def rotary_frequencies(rotary_dim: int, base: float = 10000.0) -> torch.Tensor:
    r"""The angular frequency of each rotated pair: ``base ** (-2 i / rotary_dim)``.

    Math: :math:`\theta_i = b^{-2i/d}` for :math:`i = 0, \dots, d/2 - 1`, with :math:`b` the
    ``base`` and :math:`d` the ``rotary_dim`` (Su et al. 2021, eq. 15). Pair ``i`` of a token at
    position ``p`` is rotated by :math:`p\,\theta_i` radians: pair 0 by one radian per token,
    the last pair by ``base ** (-(rotary_dim - 2) / rotary_dim)`` radians per token, a little
    more than ``1 / base``.

    Args:
        rotary_dim: Number of rotated features per head; a positive even integer.
        base: The base :math:`b`, a finite number above 1. Default: ``10000.0`` (the paper's).

    Shape:
        - Output: ``(rotary_dim // 2,)``, ``float64``, in radians per position.

    Returns:
        torch.Tensor: The frequencies, from fastest (``1.0``) to slowest.

    Raises:
        TypeError: If ``rotary_dim`` is not an int or ``base`` is not a real number.
        ValueError: If ``rotary_dim`` is not a positive even number, or ``base`` is not a
            finite number above 1.

    Source:
        Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding",
        arXiv:2104.09864, Sec. 3.2.2, eq. 15.
    """
    _require_rotary_dim(rotary_dim)
    _require_base(base)
    pair = torch.arange(rotary_dim // 2, dtype=torch.float64)  # (rotary_dim // 2,)
    return base ** (-2.0 * pair / rotary_dim)  # (rotary_dim // 2,)


def apply_rotary(
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    base: float = 10000.0,
    rotary_dim: int | None = None,
    pairing: str = "adjacent",
) -> torch.Tensor:
    r"""Rotate each pair of features of ``x`` by an angle proportional to its position.

    Math: for pair :math:`i` made of features :math:`(a, b)` of a token at position :math:`p`,
    :math:`a' = a\cos p\theta_i - b\sin p\theta_i` and :math:`b' = a\sin p\theta_i +
    b\cos p\theta_i`, with :math:`\theta_i` from :func:`rotary_frequencies`. Features beyond
    ``rotary_dim`` pass unchanged. Which features form a pair is set by ``pairing`` (see the
    module's introduction); the tests show that the two layouts give the same attention after
    :func:`rope_pairing_permutation`.

    Apply it to the queries and the keys of every head, after the projection and the head
    split and before the scores. The rotation preserves each vector's norm, and
    ``apply_rotary(q, p + s) @ apply_rotary(k, r + s)`` does not depend on the shift ``s``.

    Args:
        x: Queries or keys, split into heads.
        positions: Integer position of each token (``torch.long`` or another integer dtype),
            non-negative.
        base: The frequency base; a finite number above 1. Default: ``10000.0``.
        rotary_dim: Rotated features per head; even, at most ``head_dim``. Default:
            ``head_dim`` (all of them).
        pairing: ``"adjacent"`` (features ``2i, 2i + 1``) or ``"half"`` (features ``i`` and
            ``i + rotary_dim / 2``). Default: ``"adjacent"``.

    Shape:
        - x: ``(..., seq_len, head_dim)``, e.g. ``(batch, num_heads, seq_len, head_dim)``.
        - positions: ``(seq_len,)``, or ``(batch, seq_len)`` for ``x`` of shape
          ``(batch, num_heads, seq_len, head_dim)`` (one row of positions per sequence).
        - Output: the shape and dtype of ``x``.

    Returns:
        torch.Tensor: The rotated tensor. The angles are computed in ``float64`` and the
        rotation in ``float32`` (``float64`` for ``float64`` input), so 16-bit inputs lose
        nothing to the sines and cosines.

    Raises:
        TypeError: If ``x`` is not a floating-point tensor or ``positions`` not an integer
            tensor.
        ValueError: If ``positions`` is negative or does not fit ``x``, ``rotary_dim`` is odd,
            not positive or above ``head_dim``, ``base`` is not above 1, or ``pairing`` is
            unknown.

    Source:
        Su et al. 2021, arXiv:2104.09864, Sec. 3.4.2, eq. 34 (the adjacent pairing);
        GPT-NeoX / Hugging Face ``transformers`` ``rotate_half`` (the half pairing).
    """
    check.require_tensor("x", x)
    check.require_min_rank("x", x, 2, "(..., seq_len, head_dim)")
    check.require_floating("x", x)
    rotary_dim = x.shape[-1] if rotary_dim is None else rotary_dim
    _require_rotary_dim(rotary_dim, head_dim=x.shape[-1])
    _require_base(base)
    _require_pairing(pairing)
    _require_positions(positions, x)
    angles = _angles(positions.to(x.device), rotary_dim, base)  # (seq_len | batch, seq_len, d/2)
    return _rotate(x, angles.cos(), angles.sin(), rotary_dim, pairing)


def rope_pairing_permutation(head_dim: int, rotary_dim: int | None = None) -> torch.Tensor:
    r"""The order of features that turns the adjacent layout into the half layout.

    Math: ``perm = [0, 2, 4, ..., d - 2, 1, 3, ..., d - 1]`` over the ``d = rotary_dim``
    rotated features, followed by the unrotated ones in place. With it, for every position,
    ``apply_rotary(x[..., perm], p, pairing="half") ==
    apply_rotary(x, p, pairing="adjacent")[..., perm]``: the two layouts are the same rotation
    with the features listed in another order. A dot product does not change when both its
    vectors are permuted the same way, so:

    * weights written for the adjacent layout (GGUF files, Meta's LLaMA code) run with
      ``pairing="half"`` once the rows of each head's query and key projections are put in the
      order ``perm``: ``w_q.view(num_heads, head_dim, -1)[:, perm]``, the same for ``w_k`` and
      for the biases (the value and output projections do not change);
    * weights written for the half layout (Hugging Face, GPT-NeoX) run with
      ``pairing="adjacent"`` after the inverse order, ``torch.argsort(perm)``.

    Hugging Face's conversion of Meta's LLaMA weights applies ``perm``; llama.cpp's GGUF
    converter applies its inverse to Hugging Face checkpoints, which is why GGUF weights need
    ``pairing="adjacent"``.

    Args:
        head_dim: Features per head.
        rotary_dim: Rotated features per head (even, at most ``head_dim``). Default:
            ``head_dim``.

    Shape:
        - Output: ``(head_dim,)``, ``torch.long``: a permutation of ``0 .. head_dim - 1``.

    Returns:
        torch.Tensor: The indices ``perm``.

    Raises:
        TypeError: If a size is not an int.
        ValueError: If ``head_dim`` is not positive or ``rotary_dim`` is odd, not positive or
            above ``head_dim``.

    Source:
        Hugging Face ``transformers``, ``convert_llama_weights_to_hf.py``, ``permute``;
        llama.cpp, ``convert_hf_to_gguf.py``, ``LlamaModel.permute`` (its inverse);
        Su et al. 2021, arXiv:2104.09864, eq. 34.
    """
    check.require_positive_int("head_dim", head_dim, "features per head")
    rotary_dim = head_dim if rotary_dim is None else rotary_dim
    _require_rotary_dim(rotary_dim, head_dim=head_dim)
    rotated = torch.cat(
        [torch.arange(0, rotary_dim, 2), torch.arange(1, rotary_dim, 2)]
    )  # (rotary_dim,) the even features, then the odd ones
    return torch.cat([rotated, torch.arange(rotary_dim, head_dim)])  # (head_dim,)


class RotaryEmbedding(nn.Module):
    r"""Rotary position embedding with a precomputed table of sines and cosines.

    The module form of :func:`apply_rotary`, for use inside an attention layer:
    ``GroupedQueryAttention(..., rope=RotaryEmbedding(head_dim))`` rotates every head's
    queries and keys after the head split, and its KV cache stores the keys *after* rotation.
    The table covers positions ``0 .. max_len - 1`` (a larger position raises a clear error
    instead of silently repeating angles); it is a non-persistent buffer, so it follows
    ``.to(device)`` and stays out of ``state_dict``. It is kept in ``float64``, so that a
    ``float64`` model is rotated exactly and lower precisions lose nothing to the table;
    ``module.to(dtype)`` casts it with the rest of the model (MPS has no ``float64``: call
    ``.float()`` before moving the model there). A 16-bit cast (``model.half()``) rounds the
    sines and cosines to 16 bits too; the rotation itself still runs in ``float32``.

    Args:
        head_dim: Features per head of the layer that uses it.
        max_len: Number of positions in the table (the model's context length).
        base: The frequency base; a finite number above 1. Default: ``10000.0``. (SmolLM2 and
            LLaMA 3 use ``100000`` and ``500000``.)
        rotary_dim: Rotated features per head (even, at most ``head_dim``). Default:
            ``head_dim``.
        pairing: ``"adjacent"`` or ``"half"`` (see :func:`apply_rotary`). Default:
            ``"adjacent"``.
        device: Device of the table.

    Shape:
        - ``cos``, ``sin`` (buffers): ``(max_len, rotary_dim // 2)``, ``float64``.
        - forward: x ``(..., seq_len, head_dim)``; positions ``(seq_len,)`` or
          ``(batch, seq_len)``; output the shape and dtype of ``x``.

    Raises:
        TypeError: If a size is not an int.
        ValueError: If ``head_dim`` or ``max_len`` is not positive, ``rotary_dim`` is odd,
            not positive or above ``head_dim``, ``base`` is not above 1, or ``pairing`` is
            unknown.

    Source:
        Su et al. 2021, "RoFormer", arXiv:2104.09864, Sec. 3.4.2.
    """

    def __init__(
        self,
        head_dim: int,
        max_len: int = 4096,
        base: float = 10000.0,
        rotary_dim: int | None = None,
        pairing: str = "adjacent",
        device: torch.device | str | None = None,
    ) -> None:
        check.require_positive_int("head_dim", head_dim, "features per head")
        check.require_positive_int("max_len", max_len, "number of positions in the table")
        rotary_dim = head_dim if rotary_dim is None else rotary_dim
        _require_rotary_dim(rotary_dim, head_dim=head_dim)
        _require_base(base)
        _require_pairing(pairing)
        super().__init__()
        self.head_dim = head_dim
        self.max_len = max_len
        self.base = float(base)
        self.rotary_dim = rotary_dim
        self.pairing = pairing
        positions = torch.arange(max_len, device=device)  # (max_len,)
        angles = _angles(positions, rotary_dim, base)  # (max_len, rotary_dim // 2), float64
        self.register_buffer("cos", angles.cos(), persistent=False)  # (max_len, d/2)
        self.register_buffer("sin", angles.sin(), persistent=False)  # (max_len, d/2)

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, max_len={self.max_len}, base={self.base:g}, "
            f"rotary_dim={self.rotary_dim}, pairing={self.pairing!r}"
        )

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` (queries or keys split into heads) by the angles of ``positions``.

        Args:
            x: ``(..., seq_len, head_dim)``, floating point.
            positions: ``(seq_len,)`` or ``(batch, seq_len)``, integers in ``[0, max_len)``.

        Returns:
            torch.Tensor: The rotated tensor, the shape and dtype of ``x``.

        Raises:
            TypeError: If ``x`` is not floating point or ``positions`` not an integer tensor.
            ValueError: If ``x``'s last dimension is not ``head_dim``, or a position is
                negative or not below ``max_len`` (build the module with a larger
                ``max_len``).
        """
        check.require_tensor("x", x)
        check.require_min_rank("x", x, 2, "(..., seq_len, head_dim)")
        check.require_floating("x", x)
        if x.shape[-1] != self.head_dim:
            raise ValueError(
                f"x must have head_dim={self.head_dim} features in its last dimension, got "
                f"x.shape={tuple(x.shape)}. Split the heads first (mha_ref.split_heads), or "
                f"build RotaryEmbedding with this head_dim."
            )
        _require_positions(positions, x, max_len=self.max_len)
        return self._rotate(x, positions)

    def _rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``forward`` on tensors an attention module built itself (no checks)."""
        positions = positions.to(self.cos.device)
        cos, sin = self.cos[positions], self.sin[positions]  # (..seq_len, rotary_dim // 2)
        return _rotate(x, cos, sin, self.rotary_dim, self.pairing)


# ------------------------------------------------------------------------------------------------
# the rotation itself
# ------------------------------------------------------------------------------------------------


def _angles(positions: torch.Tensor, rotary_dim: int, base: float) -> torch.Tensor:
    """``positions * frequency`` for every pair, in float64: ``(*positions.shape, d / 2)``."""
    frequencies = rotary_frequencies(rotary_dim, base).to(positions.device)  # (d/2,)
    return positions.to(torch.float64)[..., None] * frequencies  # (..., seq_len, d/2)


def _rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int, pairing: str
) -> torch.Tensor:
    """Rotate the first ``rotary_dim`` features of ``x`` pair by pair.

    Shape: x ``(..., seq_len, head_dim)``; cos, sin ``(seq_len, d/2)`` or ``(batch, seq_len,
    d/2)`` (then ``x`` is ``(batch, heads, seq_len, head_dim)``); output as ``x``.
    """
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    if cos.dim() == 3:  # one row of positions per sequence: broadcast over the heads
        cos, sin = cos[:, None], sin[:, None]  # (batch, 1, seq_len, d/2)
    cos, sin = cos.to(compute), sin.to(compute)  # (..., seq_len, d/2)
    rotated, passed = x[..., :rotary_dim].to(compute), x[..., rotary_dim:]  # (.., d), (.., rest)
    if pairing == "adjacent":
        first, second = rotated[..., 0::2], rotated[..., 1::2]  # (..., seq_len, d/2) each
    else:
        first, second = rotated[..., : rotary_dim // 2], rotated[..., rotary_dim // 2 :]
    new_first = first * cos - second * sin  # (..., seq_len, d/2)
    new_second = first * sin + second * cos  # (..., seq_len, d/2)
    if pairing == "adjacent":
        rotated = torch.stack((new_first, new_second), dim=-1).flatten(-2)  # (..., seq_len, d)
    else:
        rotated = torch.cat((new_first, new_second), dim=-1)  # (..., seq_len, d)
    if passed.shape[-1] == 0:  # every feature rotated
        return rotated.to(x.dtype)  # (..., seq_len, head_dim)
    return torch.cat((rotated.to(x.dtype), passed), dim=-1)  # (..., seq_len, head_dim)


# ------------------------------------------------------------------------------------------------
# checks
# ------------------------------------------------------------------------------------------------


def _require_rotary_dim(rotary_dim: object, head_dim: int | None = None) -> None:
    check.require_positive_int("rotary_dim", rotary_dim, "rotated features per head")
    if rotary_dim % 2 != 0:
        raise ValueError(
            f"rotary_dim must be even, since features are rotated two at a time, got "
            f"rotary_dim={rotary_dim}. Use "
            + (f"{rotary_dim - 1} or {rotary_dim + 1}." if rotary_dim > 1 else "2.")
        )
    if head_dim is not None and rotary_dim > head_dim:
        raise ValueError(
            f"rotary_dim (={rotary_dim}) must be at most head_dim (={head_dim}): only a head's "
            f"own features can be rotated. Pass rotary_dim={head_dim - head_dim % 2} or less."
        )


def _require_base(base: object) -> None:
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(
            f"base must be a real number such as 10000.0, got {type(base).__name__} ({base!r})."
        )
    if not math.isfinite(base) or base <= 1:
        raise ValueError(
            f"base must be a finite number above 1 (the angles are positions times "
            f"base ** (-2i / rotary_dim)), got base={base!r}. The paper uses 10000.0."
        )


def _require_pairing(pairing: object) -> None:
    if pairing not in PAIRINGS:
        raise ValueError(
            f"pairing must be one of {PAIRINGS}, got pairing={pairing!r}. Use 'adjacent' for "
            f"GGUF and original LLaMA weights, 'half' for Hugging Face / GPT-NeoX weights."
        )


def _require_positions(positions: object, x: torch.Tensor, max_len: int | None = None) -> None:
    check.require_tensor("positions", positions, dtype="torch.long")
    if positions.dtype.is_floating_point or positions.dtype.is_complex or (
        positions.dtype == torch.bool
    ):
        raise TypeError(
            f"positions must be an integer tensor (torch.long), got dtype {positions.dtype}. "
            f"Build it with torch.arange(seq_len)."
        )
    seq_len = x.shape[-2]
    fits = positions.dim() == 1 and positions.shape[0] == seq_len
    if positions.dim() == 2:
        fits = positions.shape[1] == seq_len and x.dim() == 4 and positions.shape[0] in (
            1,
            x.shape[0],
        )
    if not fits:
        raise ValueError(
            f"positions must have shape (seq_len,) = ({seq_len},), or (batch, seq_len) for x of "
            f"shape (batch, num_heads, seq_len, head_dim), got positions.shape="
            f"{tuple(positions.shape)} for x.shape={tuple(x.shape)}. Pass "
            f"torch.arange(start, start + {seq_len})."
        )
    if positions.numel() == 0:
        return
    low, high = int(positions.min()), int(positions.max())
    if low < 0:
        raise ValueError(
            f"positions must be non-negative, got a minimum of {low}. Count positions from 0."
        )
    if max_len is not None and high >= max_len:
        raise ValueError(
            f"positions must be below max_len={max_len} (the table's size), got a position of "
            f"{high}. Build RotaryEmbedding with max_len={high + 1} or more."
        )
