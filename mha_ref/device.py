"""Choose the device the examples and benchmarks run on."""

from __future__ import annotations

import os

import torch

__all__ = ["pick_device", "DEVICE_ENV_VAR"]

#: Name of the environment variable that overrides ``pick_device``, e.g. ``MHA_REF_DEVICE=cpu``.
DEVICE_ENV_VAR = "MHA_REF_DEVICE"


def pick_device() -> torch.device:
    """Return ``cuda`` if available, else ``mps`` (Apple GPUs), else ``cpu``; the variable wins.

    Math: none; ``device = $MHA_REF_DEVICE if set, else the first available of cuda, mps,
    cpu``.

    Set ``MHA_REF_DEVICE`` (for example to ``cpu``, ``cuda``, ``cuda:1`` or ``mps``) to force a
    device, e.g. to get CPU numbers on a machine with a GPU.

    Returns:
        torch.device: The chosen device.

    Raises:
        ValueError: If ``MHA_REF_DEVICE`` is not a device name torch understands, or names a
            CUDA or MPS device that is not available.

    Source:
        The device-selection pattern of the PyTorch tutorials
        (``"cuda" if torch.cuda.is_available() else "cpu"``), with
        ``torch.backends.mps.is_available()`` for Apple silicon.
    """
    requested = os.environ.get(DEVICE_ENV_VAR, "").strip()
    if not requested:
        return torch.device(_first_available())
    try:
        device = torch.device(requested)
    except RuntimeError:
        raise ValueError(
            f"{DEVICE_ENV_VAR} must name a torch device such as 'cpu' or 'cuda', got "
            f"{DEVICE_ENV_VAR}={requested!r}. Fix or unset the environment variable."
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"{DEVICE_ENV_VAR}={requested!r} asks for CUDA, but torch.cuda.is_available() is "
            f"False on this machine. Set {DEVICE_ENV_VAR}=cpu or unset it."
        )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            f"{DEVICE_ENV_VAR}={requested!r} asks for MPS (Apple GPUs), but "
            f"torch.backends.mps.is_available() is False on this machine. Set "
            f"{DEVICE_ENV_VAR}=cpu or unset it."
        )
    return device


def _first_available() -> str:
    """The first of ``"cuda"``, ``"mps"``, ``"cpu"`` that this machine has."""
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"
