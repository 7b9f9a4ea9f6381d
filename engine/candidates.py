"""Each sentence's best continuations, ranked as the reference ranks them: by cumulative score, ties to
the lower beam, then the lower token id.

Shape legend: B sentences, K beams, V vocabulary, C best tokens per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GROUPS = 256  # token groups of top_candidates: few enough to scan, enough to prune well (V = 8000)


@dataclass
class Candidates:
    """The best continuations of each sentence, best first: all (B, count)."""

    scores: np.ndarray  # float32 cumulative scores
    beams: np.ndarray  # int64 beam the continuation extends
    tokens: np.ndarray  # int64 token it appends


def top_candidates(log_probs: np.ndarray, beam_scores: np.ndarray, count: int) -> Candidates:
    """log_probs (B, K, V), beam_scores (B, K) -> the ``count`` best of the B x (K*V) continuations.

    Exact, ties included, without sorting or partitioning whole rows:

    1. Tokens are dealt into G interleaved groups (token % G) and each group's maximum is taken,
       one vectorized pass over the log-probabilities.
    2. The count-th largest group maximum of a row is a lower bound of the row's count-th largest
       value (count distinct groups reach it), so every token of a row's top ``count`` is at or
       above it. Only the groups that reach the bound are read again, only their tokens at or above
       it are kept: a few more than ``count`` per row.
    3. Those candidates are sorted per sentence by (score, beam, token); the first ``count`` win.
       A sentence's best ``count`` are among its beams' best ``count``, so none is missed.
    """
    B, K, V = log_probs.shape
    rows, tokens, values = _at_or_above_bound(log_probs.reshape(B * K, V), min(count, V))
    return _best_per_sentence(rows, tokens, values, beam_scores, count, V)


def candidates_from_top(
    top_log_probs: np.ndarray, top_ids: np.ndarray, beam_scores: np.ndarray, count: int
) -> Candidates:
    """The ``count`` best continuations from each row's best C > count tokens: top_log_probs and
    top_ids (B, K, C). The same as ``top_candidates`` on the full log-probabilities, since a
    sentence's best ``count`` are among its beams' best ``count``.

    A row's tokens come best first, lower id first among equals (TopK's order), so a stable sort
    of each sentence's K*C scores, beam by beam, breaks ties by beam and then by token as
    ``top_candidates`` does, without sorting all B*K*C candidates together. Only entries a rule set
    to -inf can be out of token order among themselves, and a -inf candidate never finishes a
    hypothesis.
    """
    B, K, C = top_ids.shape
    scores = (beam_scores[:, :, None] + top_log_probs).reshape(B, K * C)  # float32, as the reference adds
    pick = np.argsort(-scores, axis=1, kind="stable")[:, :count]  # (B, count)
    tokens = np.take_along_axis(top_ids.reshape(B, K * C), pick, axis=1)
    return Candidates(np.take_along_axis(scores, pick, axis=1), pick // C, tokens)


def _best_per_sentence(
    rows: np.ndarray, tokens: np.ndarray, values: np.ndarray, beam_scores: np.ndarray, count: int, vocab: int
) -> Candidates:
    """Candidate (row, token, log-prob) triples, all (M,) -> each sentence's ``count`` best by
    cumulative score. Every sentence must have at least ``count`` of them."""
    B, K = beam_scores.shape
    scores = beam_scores.reshape(B * K)[rows] + values  # float32, as the reference adds
    sentences, beams = np.divmod(rows, K)
    order = np.lexsort((beams * vocab + tokens, -scores, sentences))
    starts = np.searchsorted(sentences[order], np.arange(B))
    pick = order[starts[:, None] + np.arange(count)]  # (B, count)
    return Candidates(scores[pick], beams[pick], tokens[pick])


def _at_or_above_bound(rows_lp: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rows_lp (N, V) -> (row, token, value), all (M,), of all entries >= a lower bound of their row's
    n-th largest."""
    N, V = rows_lp.shape
    G = min(GROUPS, V)
    full = V - V % G
    grouped = rows_lp[:, :full].reshape(N, full // G, G)  # (N, V // G, G) view: group g holds tokens = g mod G
    group_max = grouped.max(axis=1)  # (N, G)
    if full < V:  # the last V % G tokens form one more group
        group_max = np.concatenate([group_max, rows_lp[:, full:].max(axis=1, keepdims=True)], axis=1)
    bound = np.partition(group_max, -n, axis=1)[:, -n] if group_max.shape[1] >= n else np.full(N, -np.inf, np.float32)
    hit_rows, hit_groups = np.nonzero(group_max >= bound[:, None])
    parts = []
    regular = hit_groups < G
    r, g = hit_rows[regular], hit_groups[regular]
    parts.append((r[:, None], np.arange(full // G)[None, :] * G + g[:, None], grouped[r, :, g]))
    if full < V:
        r = hit_rows[~regular]
        parts.append((r[:, None], np.arange(full, V)[None, :], rows_lp[r, full:]))
    rows, tokens, values = [], [], []
    for r, t, v in parts:
        keep = v >= bound[r]
        rows.append(np.broadcast_to(r, v.shape)[keep])
        tokens.append(np.broadcast_to(t, v.shape)[keep])
        values.append(v[keep])
    return np.concatenate(rows), np.concatenate(tokens), np.concatenate(values)
