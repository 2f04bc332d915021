"""Dealing timed jobs to workers so that they finish together (used by tests/downloads)."""

from __future__ import annotations


def equal_shares(weights: list[float], shares: int) -> list[int]:
    """The share (``0 .. shares - 1``) of each job, ``weights`` sorted longest first: each job goes
    to the share with the least time so far, the first such share on a tie."""
    loads = [0.0] * shares
    chosen = []
    for weight in weights:
        share = loads.index(min(loads))
        loads[share] += weight
        chosen.append(share)
    return chosen
