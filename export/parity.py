"""Parity: the ONNX graphs compute what the PyTorch model computes.

Sentences are decoded greedily by the ONNX graphs (encoder once, then one cached decoder step per
token, starting from an empty cache). Along that same token path, each step's log-probabilities
are compared with
- PyTorch's incremental decoder carrying its own cache (same computation, other runtime), and
- PyTorch's teacher-forced decoder recomputing the whole prefix from scratch, which shows that the
  cached step graph is exact, not merely consistent with itself.
Only positions up to each sentence's EOS count; the sentences are batched with padding, so padded
source positions are exercised too.

Shapes: B sentences, S source length, T decoded steps, V vocabulary, L layers, H heads, Dh head size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

from export.decoder_step import OutputConstraints
from model.data import pad
from model.decoding import DecodingOptions, max_decoding_length
from model.transformer import Transformer


@dataclass
class GreedyRun:
    """One batch decoded greedily by the ONNX graphs."""

    tokens: np.ndarray  # (B, T) chosen ids; EOS then PAD after a sentence ends
    log_probs: np.ndarray  # (B, T, V) the step outputs
    alignment: np.ndarray  # (B, T, S)
    alive: np.ndarray  # (B, T) bool: the step belongs to the sentence (up to and including its EOS)


@dataclass
class ParityReport:
    sentences: int
    positions: int  # target positions compared
    max_abs_logprob_diff: float  # vs PyTorch incremental decoding
    max_abs_cache_vs_full_diff: float  # vs PyTorch recomputation of the whole prefix
    max_abs_alignment_diff: float
    max_abs_logsumexp: float  # their total probability's distance from PyTorch's, as log (0 = exact)
    outputs: list[list[int]]  # greedy output of each sentence (EOS excluded), input order

    def worst(self) -> float:
        return max(self.max_abs_logprob_diff, self.max_abs_cache_vs_full_diff)


class OnnxGreedy:
    """A minimal greedy decoder over the two graphs: the reference loop for parity and tests."""

    def __init__(self, encoder: Path, decoder: Path, *, eos_id: int, pad_id: int, bos_id: int) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # not a benchmark: one thread stays cheap on a busy machine
        self.encoder = ort.InferenceSession(str(encoder), options, providers=["CPUExecutionProvider"])
        self.decoder = ort.InferenceSession(str(decoder), options, providers=["CPUExecutionProvider"])
        self.eos_id, self.pad_id, self.bos_id = eos_id, pad_id, bos_id

    def decode(self, src: np.ndarray, max_lens: Sequence[int]) -> GreedyRun:
        """src (B, S) int64 padded ids; sentence b gets at most max_lens[b] steps, EOS forced at the last."""
        B = src.shape[0]
        source_names = [o.name for o in self.encoder.get_outputs()]
        source = dict(zip(source_names, self.encoder.run(None, {"src_ids": src}), strict=True))
        _, H, _, Dh = source["cross_k_0"].shape
        cache_names = [i.name for i in self.decoder.get_inputs() if i.name.startswith("self_")]
        cache = {name: np.zeros((B, H, 0, Dh), dtype=np.float32) for name in cache_names}  # P = 0: the first step
        outputs = ["log_probs", *(f"new_{name}" for name in cache_names), "alignment"]
        tokens = np.full((B, 1), self.bos_id, dtype=np.int64)
        finished = np.zeros(B, dtype=bool)
        steps: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        for step in range(max(max_lens)):
            feed = {"tokens": tokens, "candidates": np.array([1]), **cache, **source}
            log_probs, *new_cache, alignment = self.decoder.run(outputs, feed)
            cache = dict(zip(cache_names, new_cache, strict=True))
            chosen = log_probs.argmax(axis=-1)
            chosen[np.asarray(max_lens) - 1 == step] = self.eos_id  # out of room, as in model.decoding
            chosen[finished] = self.pad_id
            steps.append((chosen, log_probs, alignment, ~finished))
            finished = finished | (chosen == self.eos_id)
            if finished.all():
                break
            tokens = chosen[:, None].astype(np.int64)
        chosen, log_probs, alignment, alive = (np.stack(x, axis=1) for x in zip(*steps, strict=True))
        return GreedyRun(chosen, log_probs, alignment, alive)


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run torch on one intra-op thread, restoring the setting afterwards.

    Step-by-step decoding of small batches is dominated by per-op overhead: a second thread saves
    little, and on a busy machine waiting for it can multiply the wall time.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _max_abs(values: np.ndarray) -> float:
    """Largest absolute value; NaN becomes inf, since NaN would pass any ``<=`` tolerance check."""
    m = float(np.abs(values).max(initial=0.0))
    return m if not np.isnan(m) else float("inf")


def _logsumexp(log_probs: np.ndarray) -> np.ndarray:
    return np.log(np.exp(log_probs.astype(np.float64)).sum(-1))


@torch.no_grad()
def torch_along(
    model: Transformer, src: torch.Tensor, run: GreedyRun, *, alignment_layer: int, alignment_heads: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PyTorch's (incremental log-probs, alignment, full-recomputation log-probs) along ``run``'s tokens."""
    cfg = model.config
    memory, src_mask = model.encode(src)
    cross_k, cross_v = model.cross_kv(memory)
    B, T = run.tokens.shape
    tgt_in = torch.cat([torch.full((B, 1), cfg.bos_id), torch.from_numpy(run.tokens[:, :-1]).long()], dim=1)
    kwargs = {"alignment_layer": alignment_layer, "alignment_heads": alignment_heads}
    self_k, self_v = model.empty_cache(B)
    step_lp, step_align = [], []
    for t in range(T):
        logits, self_k, self_v, attention = model.decode(
            tgt_in[:, t : t + 1], cross_k, cross_v, src_mask, self_k, self_v, **kwargs
        )
        step_lp.append(logits[:, -1].log_softmax(dim=-1))
        step_align.append(attention[:, -1])
    full_logits = model.decode(tgt_in, cross_k, cross_v, src_mask, *model.empty_cache(B), **kwargs)[0]
    return torch.stack(step_lp, 1).numpy(), torch.stack(step_align, 1).numpy(), full_logits.log_softmax(-1).numpy()


def check_parity(
    model: Transformer,
    greedy: OnnxGreedy,
    sources: Sequence[Sequence[int]],
    *,
    alignment_layer: int,
    alignment_heads: int,
    constraints: OutputConstraints | None = None,
    batch_size: int = 16,
) -> ParityReport:
    """Decode ``sources`` (id lists ending in EOS) with the graphs and compare with PyTorch, whose
    log-probabilities go through the graphs' ``constraints`` too; banned tokens (-inf in both) are
    left out of the comparison."""
    model.eval()
    cfg = model.config
    options = DecodingOptions()
    constrain = constraints or OutputConstraints(cfg.output_vocab_size, (), renormalize=False)
    diffs = {"step": 0.0, "full": 0.0, "align": 0.0, "lse": 0.0}
    positions, outputs = 0, []
    for start in range(0, len(sources), batch_size):
        chunk = [list(s[: cfg.max_positions]) for s in sources[start : start + batch_size]]
        src = pad(chunk)
        run = greedy.decode(src.numpy(), [max_decoding_length(len(s), options, cfg.max_positions) for s in chunk])
        step_lp, step_align, full_lp = torch_along(
            model, src, run, alignment_layer=alignment_layer, alignment_heads=alignment_heads
        )
        step_lp, full_lp = (constrain(torch.from_numpy(lp)).numpy() for lp in (step_lp, full_lp))
        alive = run.alive
        allowed = np.isfinite(step_lp[alive])
        onnx_lp = run.log_probs[alive]
        diffs["step"] = max(diffs["step"], _max_abs(onnx_lp[allowed] - step_lp[alive][allowed]))
        diffs["full"] = max(diffs["full"], _max_abs(onnx_lp[allowed] - full_lp[alive][allowed]))
        diffs["align"] = max(diffs["align"], _max_abs(run.alignment[alive] - step_align[alive]))
        diffs["lse"] = max(diffs["lse"], _max_abs(_logsumexp(onnx_lp) - _logsumexp(step_lp[alive])))
        positions += int(alive.sum())
        outputs += [[int(t) for t in row[a] if t != cfg.eos_id] for row, a in zip(run.tokens, alive, strict=True)]
    return ParityReport(
        sentences=len(sources),
        positions=positions,
        max_abs_logprob_diff=diffs["step"],
        max_abs_cache_vs_full_diff=diffs["full"],
        max_abs_alignment_diff=diffs["align"],
        max_abs_logsumexp=diffs["lse"],
        outputs=outputs,
    )
