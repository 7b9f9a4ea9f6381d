"""The model side of the search: what a decoder step returns and what the search asks of a decoder.

Shape legend: B sentences still decoding, K beams, N = B*K decoder rows, V vocabulary, C best
tokens per row, S source length.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import numpy as np


@dataclass
class Step:
    """One decoder step's outputs for N rows."""

    log_probs: np.ndarray | None  # (N, V) float32, writable; None unless asked for
    top_log_probs: np.ndarray  # (N, C) float32: each row's C best, best first, lower id first among equals
    top_ids: np.ndarray  # (N, C) int64: their token ids
    attention: np.ndarray | None  # (N, S) cross-attention, when asked for

    def repeat(self, times: int | np.ndarray) -> Step:
        """Each row ``times`` times in a row (``times`` (N,): row i times[i] times)."""
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


@dataclass(frozen=True)
class Selection:
    """The rows (N',) a decoder keeps, in order, and unless None the sentences (B',) it keeps."""

    rows: np.ndarray
    sentences: np.ndarray | None


@dataclass(frozen=True)
class StepRequest:
    """What a step-wise search asks of the decoder next: the selection its last step made, if
    any, then one step over ``tokens`` (N',) with each row's best ``candidates``."""

    tokens: np.ndarray
    candidates: int
    full: bool
    selection: Selection | None = None
    # (N',) each row's sentence, where a search's sentences hold different numbers of rows; None:
    # each of its sentences holds as many, in order
    row_sentences: np.ndarray | None = None


Result = TypeVar("Result")
# A search written as a generator: it yields each step it needs and is sent the step's outputs, so
# that one driver can run many searches' steps as one decoder run (``engine.pool``).
Steps = Generator[StepRequest, Step, Result]


def drive(steps: Steps[Result], decoder: Decoder) -> Result:
    """Run a search's steps on ``decoder`` alone; its result."""
    try:
        request = next(steps)
        while True:
            if request.selection is not None:
                decoder.select(request.selection.rows, request.selection.sentences)
            request = steps.send(decoder.step(request.tokens, request.candidates, full=request.full))
    except StopIteration as done:
        return done.value


Params = ParamSpec("Params")


def driven(steps: Callable[Params, Steps[Result]]) -> Callable[Concatenate[Decoder, Params], Result]:
    """A search written as steps, as a function that runs it on a decoder given first."""

    def run(decoder: Decoder, /, *args: Params.args, **kwargs: Params.kwargs) -> Result:
        return drive(steps(*args, **kwargs), decoder)

    run.__doc__ = f"``{steps.__name__}`` run on ``decoder`` alone (``engine.decoder.drive``)."
    return run
