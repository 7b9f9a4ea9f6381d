"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

The whole model reads top to bottom: configuration, attention, the two layer kinds, then the model
with the three entry points the rest of the project uses:

- ``encode(src)``: source ids -> encoder output ("memory") and the source padding mask;
- ``cross_kv(memory)``: the cross-attention keys/values of every decoder layer, computed once per
  source and reused at every decoding step (this is what the ONNX encoder graph returns);
- ``decode(tgt, ...)``: the decoder, teacher-forced over a whole target when the self-attention cache
  is empty, or incremental (one new token per row) when it holds the previous steps. Both are the
  same code path, so incremental decoding is exact by construction and the tests check it.

Deviations from the paper, all configurable: pre-norm residual blocks by default (``pre_norm``;
LayerNorm before each sub-layer plus a final LayerNorm, which trains stably without a long warm-up
on small data); one joint vocabulary with tied source/target embeddings and output projection.
The other options describe the pretrained families ``export.hf_import`` converts: MarianMT
(post-norm, SiLU, positions as sine half then cosine half, a final logits bias) and M2M100/NLLB
(pre-norm, fairseq's positions, which start after the padding id).

Shape legend: B sentences, K beams per sentence, N = B*K decoder rows, S source length, T target
length (new positions), P cached positions, D d_model, H heads, Dh = D/H, L decoder layers,
V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    n_encoder_layers: int = 3
    n_decoder_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    max_positions: int = 256
    pre_norm: bool = True
    tie_embeddings: bool = True  # one embedding table for source and target
    tie_output: bool | None = None  # the output projection is the target embedding table; None: tie_embeddings
    target_vocab_size: int | None = None  # None: source and target share ``vocab_size`` ids
    scale_embeddings: bool = True  # token embeddings times sqrt(d_model)
    positions: Literal["interleaved", "halves", "fairseq"] = "interleaved"  # see sinusoidal_positions
    activation: Literal["relu", "gelu", "silu"] = "relu"
    final_logits_bias: bool = False  # a learned (V,) bias on the output logits
    pad_id: int = 0
    bos_id: int = 2  # the decoder's start token
    eos_id: int = 3

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "d_ff", "n_encoder_layers", "n_decoder_layers", "max_positions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be in [0, 1)")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if self.tie_embeddings and self.target_vocab_size not in (None, self.vocab_size):
            raise ValueError("tied source and target embeddings need one vocabulary")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def output_vocab_size(self) -> int:
        return self.target_vocab_size or self.vocab_size

    def to_dict(self) -> dict:
        return asdict(self)


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout: nn.Module | None = None
) -> tuple[Tensor, Tensor]:
    """softmax(QK^T / sqrt(d_head)) V over (..., Tq, Dh) queries and (..., Tk, Dh) keys/values.

    ``mask`` broadcasts to (..., Tq, Tk), True where a key may be attended. Masked keys get -inf
    before the softmax and exactly 0 after it: a row whose keys are all masked would otherwise be
    0/0 = NaN, and is all zeros instead (it contributes nothing to the output).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = torch.where(mask, weights, torch.zeros_like(weights))
    attended = dropout(weights) if dropout is not None else weights
    return attended @ v, weights


class MultiHeadAttention(nn.Module):
    """Multi-head attention split into key/value projection and attention, so that decoding can
    cache projected keys/values (self-attention) or compute them once (cross-attention)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.q_proj = nn.Linear(config.d_model, config.d_model)
        self.k_proj = nn.Linear(config.d_model, config.d_model)
        self.v_proj = nn.Linear(config.d_model, config.d_model)
        self.out_proj = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(config.attention_dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        B, T, D = x.shape
        return x.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, T, Dh)

    def merge_heads(self, x: Tensor) -> Tensor:
        return x.transpose(1, 2).flatten(2)  # (B, H, T, Dh) -> (B, T, D)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.split_heads(self.k_proj(x)), self.split_heads(self.v_proj(x))  # (B, H, T, Dh)

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """Queries from x (N, Tq, D) against k, v (B, H, Tk, Dh), with N = B*K.

        K > 1 happens in cross-attention under beam search: the K beams of a sentence share that
        sentence's keys/values, which are broadcast over the beams instead of copied K times.
        Returns the output (N, Tq, D) and weights (N, H, Tq, Tk).
        """
        N, Tq, _ = x.shape
        B, H, Tk, Dh = k.shape
        q = self.split_heads(self.q_proj(x))  # (N, H, Tq, Dh)
        # Self-attention always has one key row per query row. An exported graph keeps the branch
        # taken when it was traced: self-attention and cross-attention each trace their own, and
        # leaving out the folding reshapes where they are not needed saves ~10 graph nodes a layer.
        if B == N:
            out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)
            return self.out_proj(self.merge_heads(out)), weights
        # The K beams' queries against their sentence's keys by broadcasting: no copies, no transposes.
        q = q.view(B, N // B, H, Tq, Dh)  # (B, K, H, Tq, Dh)
        mask = mask[:, None] if mask is not None else None
        out, weights = scaled_dot_product_attention(q, k[:, None], v[:, None], mask, self.dropout)  # (B, K, H, Tq, ·)
        return self.out_proj(self.merge_heads(out.view(N, H, Tq, Dh))), weights.view(N, H, Tq, Tk)


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.d_ff)
        self.fc2 = nn.Linear(config.d_ff, config.d_model)
        self.activation = ACTIVATIONS[config.activation]
        self.dropout = nn.Dropout(config.activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))


class Residual(nn.Module):
    """x + Dropout(sublayer(LN(x))) when pre-norm, LN(x + Dropout(sublayer(x))) when post-norm."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.pre_norm = config.pre_norm
        self.norm = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def normed_input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre_norm else x

    def add(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        y = x + self.dropout(sublayer_out)
        return y if self.pre_norm else self.norm(y)


class EncoderLayer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(config)
        self.ffn = FeedForward(config)
        self.attn_res = Residual(config)
        self.ffn_res = Residual(config)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        h = self.attn_res.normed_input(x)
        k, v = self.self_attn.project_kv(h)
        x = self.attn_res.add(x, self.self_attn(h, k, v, mask)[0])
        return self.ffn_res.add(x, self.ffn(self.ffn_res.normed_input(x)))


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(config)
        self.cross_attn = MultiHeadAttention(config)
        self.ffn = FeedForward(config)
        self.self_res = Residual(config)
        self.cross_res = Residual(config)
        self.ffn_res = Residual(config)

    def forward(
        self,
        x: Tensor,
        past_k: Tensor,
        past_v: Tensor,
        causal_mask: Tensor | None,
        cross_k: Tensor,
        cross_v: Tensor,
        src_mask: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """x (N, T, D); past_k/v (N, H, P, Dh); cross_k/v (B, H, S, Dh); src_mask (B, 1, 1, S).

        Returns x, the self-attention keys/values grown to P + T, and cross-attention weights
        (N, H, T, S).
        """
        h = self.self_res.normed_input(x)
        new_k, new_v = self.self_attn.project_kv(h)
        k = torch.cat([past_k, new_k], dim=2)  # (N, H, P+T, Dh)
        v = torch.cat([past_v, new_v], dim=2)
        x = self.self_res.add(x, self.self_attn(h, k, v, causal_mask)[0])
        h = self.cross_res.normed_input(x)
        attn_out, cross_weights = self.cross_attn(h, cross_k, cross_v, src_mask)
        x = self.cross_res.add(x, attn_out)
        x = self.ffn_res.add(x, self.ffn(self.ffn_res.normed_input(x)))
        return x, k, v, cross_weights


def sinusoidal_positions(config: ModelConfig) -> Tensor:
    """The (max_positions, D) table of position encodings, in one of three conventions:

    - "interleaved" (the paper): PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...);
    - "halves" (MarianMT): the same angles, all sines first, then all cosines; computed in float64
      as transformers does, so that the table is bitwise the checkpoint's;
    - "fairseq" (M2M100/NLLB): sines then cosines of pos / 10000^(i/(D/2-1)), with positions
      counted from pad_id + 1, computed in float32 as fairseq and transformers do.
    """
    P, D = config.max_positions, config.d_model
    if config.positions == "fairseq":
        inv_freq = torch.exp(torch.arange(D // 2, dtype=torch.float32) * -(math.log(10000.0) / (D // 2 - 1)))
        angles = (torch.arange(P, dtype=torch.float32) + config.pad_id + 1)[:, None] * inv_freq  # (P, D/2)
        return torch.cat([angles.sin(), angles.cos()], dim=1)
    if config.positions == "halves":
        angles = np.arange(P)[:, None] / np.power(10000.0, 2 * np.arange(D // 2) / D)  # (P, D/2) float64
        return torch.from_numpy(np.concatenate([np.sin(angles), np.cos(angles)], axis=1)).float()
    position = torch.arange(P, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(torch.arange(0, D, 2, dtype=torch.float32) * (-math.log(10000.0) / D))
    pe = torch.zeros(P, D)
    pe[:, 0::2] = torch.sin(position * inv_freq)
    pe[:, 1::2] = torch.cos(position * inv_freq)
    return pe


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        V = config.output_vocab_size
        self.src_embed = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.tgt_embed = (
            self.src_embed if config.tie_embeddings else nn.Embedding(V, config.d_model, padding_idx=config.pad_id)
        )
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embeddings else 1.0
        self.register_buffer("positions", sinusoidal_positions(config), persistent=False)
        self.embed_dropout = nn.Dropout(config.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        # Pre-norm leaves the residual stream un-normalised: one LayerNorm closes each stack.
        self.encoder_norm = nn.LayerNorm(config.d_model) if config.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(config.d_model) if config.pre_norm else nn.Identity()
        self.output_proj = nn.Linear(config.d_model, V, bias=False)
        self.final_logits_bias = nn.Parameter(torch.zeros(V)) if config.final_logits_bias else None
        self._init_weights()
        if config.tie_embeddings if config.tie_output is None else config.tie_output:
            self.output_proj.weight = self.tgt_embed.weight

    def _init_weights(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        for embed in {self.src_embed, self.tgt_embed}:
            nn.init.normal_(embed.weight, mean=0.0, std=self.config.d_model**-0.5)
            with torch.no_grad():
                embed.weight[self.config.pad_id].zero_()

    def embed(self, embedding: nn.Embedding, ids: Tensor, offset: Tensor | int) -> Tensor:
        """Token embedding (* sqrt(D)) plus the sinusoidal encodings of positions offset..offset+T-1."""
        positions = torch.arange(ids.size(1), device=ids.device) + offset  # (T,)
        x = embedding(ids) * self.embed_scale + self.positions[positions]  # (B, T, D)
        return self.embed_dropout(x)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """src (B, S) -> memory (B, S, D) and src_mask (B, S), True on real tokens."""
        src_mask = src != self.config.pad_id
        x = self.embed(self.src_embed, src, 0)
        attn_mask = src_mask[:, None, None, :]  # (B, 1, 1, S): padded keys get zero weight
        for layer in self.encoder_layers:
            x = layer(x, attn_mask)
        return self.encoder_norm(x), src_mask

    def cross_kv(self, memory: Tensor) -> tuple[list[Tensor], list[Tensor]]:
        """memory (B, S, D) -> cross-attention keys and values, one (B, H, S, Dh) tensor per layer."""
        kvs = [layer.cross_attn.project_kv(memory) for layer in self.decoder_layers]
        return [k for k, _ in kvs], [v for _, v in kvs]

    def empty_cache(self, n_rows: int, device: torch.device | None = None) -> tuple[list[Tensor], list[Tensor]]:
        """Self-attention keys and values before the first step: one (N, H, 0, Dh) tensor per layer."""
        c = self.config
        shape = (n_rows, c.n_heads, 0, c.d_head)
        layers = range(c.n_decoder_layers)
        return [torch.zeros(shape, device=device) for _ in layers], [torch.zeros(shape, device=device) for _ in layers]

    def decode(
        self,
        tgt: Tensor,
        cross_k: Sequence[Tensor],
        cross_v: Sequence[Tensor],
        src_mask: Tensor,
        self_k: Sequence[Tensor],
        self_v: Sequence[Tensor],
        *,
        alignment_layer: int = -1,
        alignment_heads: int = 0,
    ) -> tuple[Tensor, list[Tensor], list[Tensor], Tensor]:
        """Decode T new target positions for N = B*K rows, after P cached ones.

        tgt (N, T) token ids; cross_k/v one (B, H, S, Dh) tensor per layer; src_mask (B, S);
        self_k/v one (N, H, P, Dh) tensor per layer, P = 0 for teacher forcing or the first step.
        The caches are per-layer lists rather than one stacked tensor so that an exported step
        reads and writes each layer's cache directly, with no split or stack copying all of them.
        Returns logits (N, T, V), self_k/v grown to (N, H, P+T, Dh), and the cross-attention
        weights (N, T, S) of decoder layer ``alignment_layer`` averaged over its first
        ``alignment_heads`` heads (0 = all heads).
        """
        P, T = self_k[0].size(2), tgt.size(1)
        x = self.embed(self.tgt_embed, tgt, P)  # (N, T, D)
        # Query t (absolute position P+t) sees keys 0..P+t: future positions get zero weight.
        # A single new query (T = 1, every incremental step) sees all P+1 keys, so needs no mask.
        causal_mask = (
            torch.arange(P + T, device=tgt.device)[None, :] <= (P + torch.arange(T, device=tgt.device))[:, None]
            if T > 1
            else None
        )
        src_attn_mask = src_mask[:, None, None, :]  # (B, 1, 1, S)
        new_k, new_v, cross_weights = [], [], []
        for i, layer in enumerate(self.decoder_layers):
            x, k, v, w = layer(x, self_k[i], self_v[i], causal_mask, cross_k[i], cross_v[i], src_attn_mask)
            new_k.append(k)
            new_v.append(v)
            cross_weights.append(w)
        logits = self.logits(self.decoder_norm(x))  # (N, T, V)
        heads = cross_weights[alignment_layer]  # (N, H, T, S)
        if alignment_heads:
            heads = heads[:, :alignment_heads]
        return logits, new_k, new_v, heads.mean(dim=1)

    def logits(self, x: Tensor) -> Tensor:
        """The output projection of normalised decoder states (..., D) -> (..., V)."""
        logits = self.output_proj(x)
        return logits if self.final_logits_bias is None else logits + self.final_logits_bias

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced training pass: src (B, S), tgt_in (B, T) -> logits (B, T, V)."""
        memory, src_mask = self.encode(src)
        cross_k, cross_v = self.cross_kv(memory)
        self_k, self_v = self.empty_cache(src.size(0), src.device)
        return self.decode(tgt_in, cross_k, cross_v, src_mask, self_k, self_v)[0]


def build_model(config: ModelConfig) -> Transformer:
    return Transformer(config)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
