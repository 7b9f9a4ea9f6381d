"""PyTorch reference decoding *without* the self-attention KV cache, for the cache's speedup.

``PrefixRecomputingModel`` wraps a ``Transformer`` so that ``model.decoding.beam_search`` runs
unchanged while every step re-decodes the whole target prefix with ``model.decode`` from an empty
cache. The "cache" the search carries and reorders by beam origin is the prefix of token ids
itself, stored as a one-"layer" cache of shape (N, 1, P, 1) so that the search's per-layer
``cache[rows]`` reordering applies to it as is. Search rules, scores and outputs are therefore
identical to the cached path; only the cost per step changes, from O(1) to O(P) positions. The
cross-attention keys/values are still computed once per sentence: the comparison isolates the
self-attention cache.
"""

from __future__ import annotations

import torch
from torch import Tensor

from model.transformer import ModelConfig, Transformer


class PrefixRecomputingModel:
    """The subset of ``Transformer`` that ``beam_search`` uses, minus the self-attention cache."""

    def __init__(self, model: Transformer) -> None:
        self.model = model
        self.config: ModelConfig = model.config

    def eval(self) -> PrefixRecomputingModel:
        self.model.eval()
        return self

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        return self.model.encode(src)

    def cross_kv(self, memory: Tensor) -> tuple[list[Tensor], list[Tensor]]:
        return self.model.cross_kv(memory)

    def empty_cache(self, n_rows: int, device: torch.device | None = None) -> tuple[list[Tensor], list[Tensor]]:
        history = [torch.zeros((n_rows, 1, 0, 1), device=device)]  # no tokens yet
        return history, history

    def decode(
        self,
        tgt: Tensor,
        cross_k: list[Tensor],
        cross_v: list[Tensor],
        src_mask: Tensor,
        self_k: list[Tensor],
        self_v: list[Tensor],
        **kw,
    ) -> tuple[Tensor, list[Tensor], list[Tensor], Tensor]:
        """tgt (N, 1) new tokens; self_k [(N, 1, P, 1)] the token history -> last-position outputs."""
        N, P = self_k[0].size(0), self_k[0].size(2)
        prefix = torch.cat([self_k[0].reshape(N, P).long(), tgt], dim=1)  # (N, P+1)
        empty_k, empty_v = self.model.empty_cache(N, tgt.device)
        logits, _, _, attention = self.model.decode(prefix, cross_k, cross_v, src_mask, empty_k, empty_v, **kw)
        history = [prefix.float()[:, None, :, None]]  # (N, 1, P+1, 1); exact for ids < 2**24
        return logits[:, -1:], history, history, attention[:, -1:]
