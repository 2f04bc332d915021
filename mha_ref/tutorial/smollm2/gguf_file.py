"""Reading the GGUF file: moved to :mod:`mha_ref.tutorial.real_models.gguf`, shared by every real
model; the names stay importable from here."""

from __future__ import annotations

from mha_ref.tutorial.real_models.gguf import GGUFContents, read_gguf  # noqa: F401

__all__: list[str] = []
