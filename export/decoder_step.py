"""The decoder step as exported: ``Transformer.decode`` for one new token, written for a lean graph.

``Transformer.decode`` handles any number of new positions T, so its activations are (N, T, D) and
every head split and merge is a reshape plus a transpose. An incremental step always has T = 1,
and with the time axis gone most of that work disappears:

- activations are (N, D); each projection is a MatMul + Add (not the Gemm a 2-D ``nn.Linear``
  exports as, which onnxruntime's dynamic quantisation leaves in float), which onnxruntime fuses
  into one Gemm in float and one DynamicQuantizeMatMul in int8;
- splitting (N, D) into (N, H, 1, Dh) heads, or merging them back, is a reshape with a constant
  shape, with no transpose;
- the self-attention query, key and value projections are one product with the three weight
  matrices side by side (concatenated at export, folded into one constant);
- the source padding mask becomes one additive bias (0 or -inf) shared by all layers, instead of
  a masked fill and a zeroing Where per layer: identical weights, as no source is all padding.

Same inputs, outputs and semantics as the traced ``decode`` (``engine.bundle.decoder_signature``);
the export's parity check compares this graph with ``Transformer.decode`` on real sentences.
Shapes: B sentences, K beams, N = B*K rows, S source length, P cached positions, H heads,
Dh head size, D = H*Dh, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from model.transformer import DecoderLayer, MultiHeadAttention, Transformer


class DecoderStep(nn.Module):
    """tokens (N, 1), L self keys, L self values (N, H, P, Dh), L cross keys, L cross values
    (B, H, S, Dh), src_mask (B, S) -> log_probs (N, V), the caches grown to P + 1, and the
    cross-attention (N, S) of ``alignment_layer`` averaged over its first ``alignment_heads``
    heads (0 = all)."""

    def __init__(
        self,
        model: Transformer,
        *,
        alignment_layer: int,
        alignment_heads: int,
        constraints: OutputConstraints | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        cfg = model.config
        self.layers, self.heads, self.d_head, self.d_model = cfg.n_decoder_layers, cfg.n_heads, cfg.d_head, cfg.d_model
        self.alignment_layer = alignment_layer % self.layers
        self.alignment_heads = alignment_heads or self.heads
        self.constraints = constraints or OutputConstraints(cfg.output_vocab_size, (), renormalize=False)

    def forward(self, tokens: Tensor, *caches_and_source: Tensor) -> tuple[Tensor, ...]:
        L = self.layers
        self_k, self_v, cross_k, cross_v = (caches_and_source[i * L : (i + 1) * L] for i in range(4))
        src_mask = caches_and_source[4 * L]
        model = self.model
        position = self_k[0].shape[2]  # P: the new token's position
        x = model.tgt_embed(tokens.reshape(-1)) * model.embed_scale + model.positions[position]  # (N, D)
        src_bias = torch.where(src_mask, 0.0, float("-inf"))[:, None, None, :]  # (B, 1, 1, S)
        # One (B, K, H, Dh) shape for every layer's cross-attention queries, so that onnxruntime
        # computes it once (common subexpression elimination) instead of once per layer.
        beams_shape = (src_mask.shape[0], -1, self.heads, self.d_head)
        new_k, new_v = [], []
        for i, layer in enumerate(model.decoder_layers):
            x, k, v, weights = self._layer(
                layer, x, self_k[i], self_v[i], cross_k[i], cross_v[i], src_bias, beams_shape
            )
            new_k.append(k)
            new_v.append(v)
            if i == self.alignment_layer:
                alignment = weights[:, : self.alignment_heads].mean(dim=1)  # (B, K, S)
        logits = model.decoder_norm(x) @ model.output_proj.weight.T  # (N, V)
        log_probs = self.constraints.biased(logits, model.final_logits_bias)
        return log_probs, *new_k, *new_v, alignment.reshape(x.shape[0], -1)

    def _layer(
        self,
        layer: DecoderLayer,
        x: Tensor,
        past_k: Tensor,
        past_v: Tensor,
        cross_k: Tensor,
        cross_v: Tensor,
        src_bias: Tensor,
        beams_shape: tuple,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """x (N, D) -> x, self keys/values grown to (N, H, P+1, Dh), cross-attention weights (B, H, K, S)."""
        attn = layer.self_attn
        h = layer.self_res.normed_input(x)
        weight, bias = _stacked_qkv(attn)
        qkv = h @ weight.T + bias  # (N, 3D)
        D = self.d_model  # a constant: shape arithmetic in the graph costs nodes
        q, k, v = (t.reshape(-1, self.heads, 1, self.d_head) for t in qkv.split([D, D, D], dim=-1))  # (N, H, 1, Dh)
        k = torch.cat([past_k, k], dim=2)  # (N, H, P+1, Dh)
        v = torch.cat([past_v, v], dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (N, H, 1, P+1)
        out = scores.softmax(dim=-1) @ v  # (N, H, 1, Dh)
        x = layer.self_res.add(x, _linear(out.reshape(-1, D), attn.out_proj))

        h = layer.cross_res.normed_input(x)
        out, weights = self._cross_attention(layer.cross_attn, h, cross_k, cross_v, src_bias, beams_shape)
        x = layer.cross_res.add(x, out)
        ffn = layer.ffn
        hidden = ffn.activation(_linear(layer.ffn_res.normed_input(x), ffn.fc1))  # (N, D_ff)
        x = layer.ffn_res.add(x, _linear(hidden, ffn.fc2))
        return x, k, v, weights

    def _cross_attention(
        self, attn: MultiHeadAttention, h: Tensor, k: Tensor, v: Tensor, src_bias: Tensor, beams_shape: tuple
    ) -> tuple[Tensor, Tensor]:
        """The K beams of a sentence query that sentence's keys/values, broadcast, not copied."""
        q = _linear(h, attn.q_proj).reshape(beams_shape).transpose(1, 2)  # (B, H, K, Dh)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head) + src_bias  # (B, H, K, S)
        weights = scores.softmax(dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(-1, self.d_model)  # (B, K, H, Dh) -> (N, D)
        return _linear(out, attn.out_proj), weights


class OutputConstraints(nn.Module):
    """Scores (N, V), logits or log-probabilities (any per-row shift), to log-probabilities with
    banned tokens at -inf, as transformers' bad_words_ids. With ``renormalize`` (its
    renormalize_logits) the rest sum to 1: log_softmax(log_softmax(x) + ban), which is
    log_softmax(x + ban), one pass over V instead of two. Without it, they keep the probabilities
    the model gives them. The parity check applies the same module to PyTorch's log-probabilities."""

    def __init__(self, vocab: int, banned_ids: Sequence[int], *, renormalize: bool) -> None:
        super().__init__()
        ban = torch.zeros(vocab)
        ban[list(banned_ids)] = float("-inf")
        self.register_buffer("ban", ban if banned_ids else None, persistent=False)
        self.renormalize = renormalize

    def biased(self, logits: Tensor, bias: Tensor | None) -> Tensor:
        """``self(logits + bias)`` as the exported step computes it: a ban that comes before
        LogSoftmax (``renormalize``) is folded into the projection's bias, one (N, V) addition
        fewer per step (3.8-4.8% of an OPUS-MT step's kernel time). Exactly the same values: ``b + 0``
        is ``b``, and anything plus -inf is -inf."""
        if self.ban is not None and self.renormalize:
            return (logits + (self.ban if bias is None else bias + self.ban)).log_softmax(dim=-1)
        return self(logits if bias is None else logits + bias)

    def forward(self, scores: Tensor) -> Tensor:
        if self.ban is None:
            return scores.log_softmax(dim=-1)
        if self.renormalize:
            return (scores + self.ban).log_softmax(dim=-1)
        return scores.log_softmax(dim=-1) + self.ban


def _stacked_qkv(attn: MultiHeadAttention) -> tuple[Tensor, Tensor]:
    """The query, key and value projections as one (3D, D) weight and (3D,) bias."""
    projections = (attn.q_proj, attn.k_proj, attn.v_proj)
    return torch.cat([p.weight for p in projections]), torch.cat([p.bias for p in projections])


def _linear(x: Tensor, layer: nn.Linear) -> Tensor:
    """``layer(x)`` as MatMul + Add (see the module docstring)."""
    return x @ layer.weight.T + layer.bias
