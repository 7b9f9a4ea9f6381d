"""Do two systems produce the same translations as the PyTorch reference, up to numerical ties?

Identical text counts as agreement. For a sentence whose outputs differ, the reference output is
re-decoded alone (outputs do not depend on batch composition) and both token sequences are scored
by the PyTorch model, teacher-forced. The difference is a *numerical tie* when either
- at the first position where the two sequences differ, both tokens have log-probabilities within
  ``tol`` of each other given their common prefix (greedy/beam choices between near-equal tokens), or
- the two complete outputs have length-normalised scores within ``tol`` (beam search ranking
  near-equal hypotheses).
A third benign case is the length cap: the reference stops a sentence at
min(model limit, 1.5 * source length + 10) tokens, CTranslate2 only at the model limit, so a
runaway output that the reference cut off and the other system continued agrees up to the cut.
Anything else is a real disagreement, listed with its scores so it can be inspected.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.tokenizer import BOS_ID, EOS_ID, Tokenizer
from model.data import pad
from model.decoding import DecodingOptions, beam_search, max_decoding_length
from model.transformer import Transformer

TIE_TOLERANCE = 1e-3


@dataclass
class Agreement:
    sentences: int
    identical: int = 0
    ties: int = 0
    capped: int = 0
    disagreements: list[dict] = field(default_factory=list)

    @property
    def identical_rate(self) -> float:
        return self.identical / self.sentences

    @property
    def agreement_rate(self) -> float:
        """Identical, a numerical tie, or equal up to the reference's length cap."""
        return (self.identical + self.ties + self.capped) / self.sentences

    def to_dict(self) -> dict:
        return {
            "sentences": self.sentences,
            "identical": self.identical,
            "ties": self.ties,
            "capped": self.capped,
            "identical_rate": self.identical_rate,
            "agreement_rate": self.agreement_rate,
            "disagreements": self.disagreements,
        }


@torch.no_grad()
def token_log_probs(model: Transformer, src_ids: list[int], tgt_ids: list[int]) -> list[float]:
    """Log-probability of each of ``tgt_ids`` + EOS given the source and the previous tokens."""
    memory, src_mask = model.encode(pad([src_ids]))
    cross_k, cross_v = model.cross_kv(memory)
    self_k, self_v = model.empty_cache(1)
    tgt_in = torch.tensor([[BOS_ID, *tgt_ids]])
    logits = model.decode(tgt_in, cross_k, cross_v, src_mask, self_k, self_v)[0]
    log_probs = logits[0].float().log_softmax(dim=-1)  # (T+1, V)
    return log_probs[torch.arange(len(tgt_ids) + 1), torch.tensor([*tgt_ids, EOS_ID])].tolist()


def is_tie(model: Transformer, src_ids: list[int], a: list[int], b: list[int], length_penalty: float) -> dict:
    """Score two outputs of the same source; see the module docstring for what a tie is."""
    lp_a, lp_b = token_log_probs(model, src_ids, a), token_log_probs(model, src_ids, b)
    first = next(i for i, (x, y) in enumerate(zip([*a, EOS_ID], [*b, EOS_ID], strict=False)) if x != y)
    norm_a = sum(lp_a) / len(lp_a) ** length_penalty
    norm_b = sum(lp_b) / len(lp_b) ** length_penalty
    step_gap, score_gap = abs(lp_a[first] - lp_b[first]), abs(norm_a - norm_b)
    return {
        "tie": step_gap <= TIE_TOLERANCE or score_gap <= TIE_TOLERANCE,
        "first_difference": first,
        "step_gap": step_gap,
        "reference_score": norm_a,
        "other_score": norm_b,
    }


def compare(
    model: Transformer,
    tokenizer: Tokenizer,
    sources: list[str],
    reference: list[str],
    other: list[str],
    other_ids: list[list[int]] | None = None,
    *,
    beam_size: int,
    length_penalty: float = 1.0,
) -> Agreement:
    """Agreement of ``other`` with the PyTorch ``reference`` translations of ``sources``."""
    result = Agreement(sentences=len(other))
    options = DecodingOptions(beam_size=beam_size, length_penalty=length_penalty)
    for i, (ref_text, other_text) in enumerate(zip(reference, other, strict=False)):
        if ref_text == other_text:
            result.identical += 1
            continue
        src_ids = tokenizer.encode(sources[i])
        ref_ids = beam_search(model, pad([src_ids]), options)[0][0].tokens
        # Without the system's own ids, re-tokenize its text: the canonical segmentation of the same words.
        ids = other_ids[i] if other_ids is not None else tokenizer.sp.encode(other_text)
        if ids == ref_ids:  # the texts differed by normalisation only
            result.identical += 1
            continue
        cap = max_decoding_length(len(src_ids), options, model.config.max_positions)
        if len(ref_ids) + 1 == cap and ids[: len(ref_ids)] == ref_ids:
            result.capped += 1
            continue
        if len(ids) >= model.config.max_positions:  # ran past the model's positions: cannot be scored
            result.disagreements.append({"index": i, "reference": ref_text, "other": other_text, "tie": False})
            continue
        verdict = is_tie(model, src_ids, ref_ids, ids, length_penalty)
        if verdict["tie"]:
            result.ties += 1
        else:
            result.disagreements.append({"index": i, "reference": ref_text, "other": other_text, **verdict})
    return result
