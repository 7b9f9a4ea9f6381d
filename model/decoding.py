"""Reference decoding in PyTorch: greedy and beam search over the model's incremental decoder.

This is the specification the ONNX engine (engine/beam_search.py) is checked against, written for
clarity rather than speed. Both follow the same rules:

- Scores are sums of log-probabilities. A finished hypothesis of n target tokens (EOS included) is
  ranked by ``score / n ** length_penalty``.
- Each step takes the 2K best (beam, token) continuations of a sentence in descending score order;
  an EOS among the first K finishes that hypothesis, the first K non-EOS ones become the next beams.
- A sentence is done once it has K finished hypotheses. EOS is forbidden before ``min_length``
  generated tokens and forced at the last allowed step, ``max_length`` = min(model limit,
  ``max_length_a`` * source length + ``max_length_b``), source length counting its EOS.
- Beam size 1 is greedy decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from model.transformer import Transformer


@dataclass(frozen=True)
class DecodingOptions:
    beam_size: int = 4
    num_hypotheses: int = 1
    length_penalty: float = 1.0
    min_length: int = 0
    max_length_a: float = 1.5
    max_length_b: int = 10
    max_length: int = 256


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, EOS excluded
    score: float  # sum of log-probabilities, EOS included
    normalized_score: float


def max_decoding_length(src_len: int, options: DecodingOptions, model_limit: int) -> int:
    return max(1, min(model_limit, options.max_length, int(options.max_length_a * src_len + options.max_length_b)))


@torch.no_grad()
def beam_search(model: Transformer, src: Tensor, options: DecodingOptions) -> list[list[Hypothesis]]:
    """src (B, S) padded ids -> the n-best hypotheses of each sentence, best first."""
    model.eval()
    cfg = model.config
    B, K, V = src.size(0), options.beam_size, cfg.output_vocab_size
    memory, src_mask = model.encode(src)
    cross_k, cross_v = model.cross_kv(memory)  # per layer (B, H, S, Dh), shared by the K beams of a sentence
    src_lens = src_mask.sum(dim=1).tolist()
    max_lens = [max_decoding_length(n, options, cfg.max_positions) for n in src_lens]

    self_k, self_v = model.empty_cache(B * K, src.device)
    tokens = torch.full((B * K, 1), cfg.bos_id, dtype=torch.long, device=src.device)
    beam_scores = torch.full((B, K), float("-inf"), device=src.device)
    beam_scores[:, 0] = 0.0  # all beams start identical: only the first one may expand at step 0
    histories: list[list[int]] = [[] for _ in range(B * K)]
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    done = [False] * B

    for step in range(max(max_lens)):
        logits, self_k, self_v, _ = model.decode(tokens, cross_k, cross_v, src_mask, self_k, self_v)
        log_probs = logits[:, -1].float().log_softmax(dim=-1).view(B, K, V)
        eos_log_probs = log_probs[:, :, cfg.eos_id].clone()
        if step < options.min_length:
            log_probs[:, :, cfg.eos_id] = float("-inf")
        for b in range(B):
            if step == max_lens[b] - 1:  # out of room: EOS is the only continuation
                log_probs[b] = float("-inf")
                log_probs[b, :, cfg.eos_id] = eos_log_probs[b]
        candidates = (beam_scores[:, :, None] + log_probs).view(B, K * V)
        top_scores, top_ids = candidates.topk(2 * K, dim=1)

        next_rows = torch.zeros(B * K, dtype=torch.long)
        next_tokens = torch.full((B * K,), cfg.pad_id, dtype=torch.long)
        next_scores = torch.full((B, K), float("-inf"))
        new_histories = [[] for _ in range(B * K)]
        for b in range(B):
            if done[b]:
                continue
            n_beams = 0
            for rank, (score, flat) in enumerate(zip(top_scores[b].tolist(), top_ids[b].tolist(), strict=True)):
                beam, token = divmod(flat, V)
                history = histories[b * K + beam]
                if token == cfg.eos_id:
                    if rank < K and score > float("-inf"):
                        n = len(history) + 1
                        finished[b].append(Hypothesis(history, score, score / n**options.length_penalty))
                    continue
                if n_beams < K:
                    row = b * K + n_beams
                    next_rows[row], next_tokens[row] = b * K + beam, token
                    next_scores[b, n_beams] = score
                    new_histories[row] = history + [token]
                    n_beams += 1
            done[b] = len(finished[b]) >= K or step == max_lens[b] - 1
        if all(done):
            break
        beam_scores = next_scores.to(src.device)
        histories = new_histories
        self_k, self_v = [k[next_rows] for k in self_k], [v[next_rows] for v in self_v]
        tokens = next_tokens[:, None].to(src.device)

    return [sorted(hyps, key=lambda h: h.normalized_score, reverse=True)[: options.num_hypotheses] for hyps in finished]
