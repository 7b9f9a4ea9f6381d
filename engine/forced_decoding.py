"""Teacher forcing: the model's score of given translations, and its attention at each of their tokens.

The search finds translations; this scores ones already written (``engine.replacement``'s, a
translation with a glossary term put in), so that they report what the model makes of them:
their score as the search would have counted it, and the cross-attention alignments are read from.

Shape legend: B sentences, N translations (rows), T the longest translation's tokens with EOS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from engine.beam_search import Hypothesis, normalized
from engine.decoder import Selection, StepRequest, Steps, driven


@dataclass(frozen=True)
class Forced:
    """A translation to score: its generated ids (EOS excluded), and whether EOS ends it."""

    tokens: tuple[int, ...]
    eos: bool = True


def score_steps(
    translations: Sequence[Sequence[Forced]],
    *,
    bos_id: int,
    eos_id: int,
    prefix_length: int,
    length_penalty: float,
) -> Steps[list[list[Hypothesis]]]:
    """Each sentence's ``translations`` (B lists) fed to ``decoder`` (one row per sentence) token by
    token -> their hypotheses, in the same order. The first ``prefix_length`` tokens of each are
    forced ones (the target language's), scored 0 as the search scores them; attention is kept
    when the decoder gives it.

    The scoring as the steps it asks of a decoder (``engine.decoder.Steps``); ``score`` runs it on
    one decoder."""
    owners = np.repeat(np.arange(len(translations)), [len(t) for t in translations])  # (N,)
    flat = [f for sentence in translations for f in sentence]
    selection: Selection | None = Selection(owners, owners)  # a row, and its sentence's source, for each translation
    lengths = np.array([len(f.tokens) + f.eos for f in flat])
    targets = np.full((len(flat), int(lengths.max(initial=0))), eos_id, dtype=np.int64)  # (N, T)
    for row, f in enumerate(flat):
        targets[row, : len(f.tokens)] = f.tokens
    rows = np.arange(len(flat))
    log_probs = np.zeros(targets.shape, dtype=np.float32)  # (N, T)
    attention = []
    tokens = np.full(len(flat), bos_id, dtype=np.int64)
    for t in range(targets.shape[1]):
        step = yield StepRequest(tokens, 1, True, selection)
        selection = None
        assert step.log_probs is not None
        log_probs[:, t] = step.log_probs[rows, targets[:, t]]
        attention.append(step.attention)
        tokens = targets[:, t]
    counted = (np.arange(targets.shape[1]) >= prefix_length) & (np.arange(targets.shape[1]) < lengths[:, None])
    scores = np.where(counted, log_probs, np.float32(0)).sum(axis=1, dtype=np.float32)  # (N,)
    weights = np.stack(attention, axis=1) if attention and attention[0] is not None else None  # (N, T, S)
    hypotheses = [
        Hypothesis(
            tokens=list(f.tokens),
            score=float(scores[row]),
            normalized_score=normalized(float(scores[row]), int(lengths[row]), length_penalty),
            attention=None if weights is None else weights[row, : lengths[row]],
            eos=f.eos,
        )
        for row, f in enumerate(flat)
    ]
    bounds = np.cumsum([0, *(len(t) for t in translations)])
    return [hypotheses[a:b] for a, b in pairwise(bounds)]


score = driven(score_steps)
