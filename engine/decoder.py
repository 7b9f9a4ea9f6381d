"""The model side of the search: what a decoder step returns and what the search asks of a decoder.

Shape legend: B sentences still decoding, K beams, N = B*K decoder rows, V vocabulary, C best
tokens per row, S source length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class Step:
    """One decoder step's outputs for N rows."""

    log_probs: np.ndarray | None  # (N, V) float32, writable; None unless asked for
    top_log_probs: np.ndarray  # (N, C) float32: each row's C best, best first, lower id first among equals
    top_ids: np.ndarray  # (N, C) int64: their token ids
    attention: np.ndarray | None  # (N, S) cross-attention, when asked for

    def repeat(self, times: int) -> Step:
        """Each row ``times`` times in a row."""
        arrays = (self.log_probs, self.top_log_probs, self.top_ids, self.attention)
        return Step(*(None if a is None else np.repeat(a, times, axis=0) for a in arrays))


class Decoder(Protocol):
    """It starts with one row per sentence; after the first step, row n*K + k is beam k of sentence n."""

    def step(self, tokens: np.ndarray, candidates: int, *, full: bool = True) -> Step:
        """tokens (N,) int64 -> the step's outputs, with each row's best ``candidates`` (>= 1) tokens,
        and all log-probabilities only if ``full``: the search mostly reads the best tokens alone, and
        copying (N, V) floats out of the step is not free."""
        ...

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        """Keep decoder rows ``rows`` (N',) in that order and, unless None, only the sentences ``sentences`` (B',)."""
        ...
