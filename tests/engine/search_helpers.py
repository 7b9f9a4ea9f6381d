"""Shared by the search's tests: the decoder graph's TopK, and a rule of the kind a caller adds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from engine.rules import NEG_INF, StepContext


def best_tokens(log_probs: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``count`` best, as the graph's TopK gives them: (values, ids), both (..., count)."""
    ids = np.argsort(-log_probs, axis=-1, kind="stable")[..., :count]
    return np.take_along_axis(log_probs, ids, axis=-1), ids


@dataclass(frozen=True)
class ForceFirstToken:
    """Every hypothesis starts with ``token``, at log-probability 0 (as a target-language tag would)."""

    token: int
    top_bans: ClassVar[int | None] = 0

    def apply_full(self, log_probs: np.ndarray, ctx: StepContext) -> None:
        if ctx.step == 0:
            log_probs[:] = NEG_INF
            log_probs[:, :, self.token] = 0.0

    def apply_top(self, top_log_probs: np.ndarray, top_ids: np.ndarray, ctx: StepContext) -> None:
        if ctx.step == 0:
            top_log_probs[:] = NEG_INF
            top_log_probs[:, :, 0] = 0.0
            top_ids[:, :, 0] = self.token
