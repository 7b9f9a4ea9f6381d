"""Each hypothesis's cross-attention, followed back through the search's beam reordering."""

from __future__ import annotations

import numpy as np


class AttentionTrace:
    """Every step's cross-attention, kept by reference, and each row's parent row in the step before.

    Reading a hypothesis's attention walks the parents back, which follows beam reordering and
    dropped sentences without copying attention histories at every step.
    """

    def __init__(self) -> None:
        self.steps: list[np.ndarray] = []  # step t: (N_t, S)
        self.parents: list[np.ndarray] = []  # parents[t] (N_t+1,): rows of step t continued by the rows of step t+1

    def path(self, row: int) -> np.ndarray:
        """The attention (T, S) that led to ``row`` of the latest step, that step included."""
        rows = []
        for t in range(len(self.steps) - 1, -1, -1):
            rows.append(self.steps[t][row])
            if t:
                row = int(self.parents[t - 1][row])
        return np.stack(rows[::-1])
