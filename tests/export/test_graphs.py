"""The exported graphs against the PyTorch model at shapes other than the traced ones: batch 1 and 7,
source lengths 1 and 100, beams sharing a sentence's cross keys/values, starting from an empty cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.bundle import per_layer
from export.parity import OnnxGreedy
from model.transformer import Transformer

TOL = 1e-4


def random_source(model: Transformer, batch: int, length: int, seed: int) -> np.ndarray:
    """(batch, length) ids ending in EOS; rows after the first are shorter, i.e. padded."""
    cfg = model.config
    rng = np.random.default_rng(seed)
    src = rng.integers(4, cfg.vocab_size, size=(batch, length))
    for row in range(batch):
        n = length if row == 0 else int(rng.integers(1, length + 1))
        src[row, n - 1] = cfg.eos_id
        src[row, n:] = cfg.pad_id
    return src.astype(np.int64)


def run_steps(greedy: OnnxGreedy, model: Transformer, src: np.ndarray, *, beams: int, layer: int, steps: int) -> None:
    """Decode ``steps`` steps with random tokens for B*beams rows in both runtimes, comparing all outputs."""
    L = model.config.n_decoder_layers
    encoder_outputs = greedy.encoder.run(None, {"src_ids": src})
    assert [o.name for o in greedy.encoder.get_outputs()] == per_layer("cross_k", L) + per_layer("cross_v", L) + [
        "src_mask"
    ]
    source = dict(zip([o.name for o in greedy.encoder.get_outputs()], encoder_outputs, strict=True))
    src_mask = source["src_mask"]
    with torch.no_grad():
        t_memory, t_mask = model.encode(torch.from_numpy(src))
        t_cross_k, t_cross_v = model.cross_kv(t_memory)
    assert np.array_equal(src_mask, t_mask.numpy())
    for i in range(L):
        assert np.abs(source[f"cross_k_{i}"] - t_cross_k[i].numpy()).max() <= TOL
        assert np.abs(source[f"cross_v_{i}"] - t_cross_v[i].numpy()).max() <= TOL

    B, H, S, Dh = source["cross_k_0"].shape
    N = B * beams
    cache_names = per_layer("self_k", L) + per_layer("self_v", L)
    cache = {name: np.zeros((N, H, 0, Dh), dtype=np.float32) for name in cache_names}
    t_self_k, t_self_v = model.empty_cache(N)
    rng = np.random.default_rng(0)
    for step in range(steps):
        tokens = rng.integers(4, model.config.vocab_size, size=(N, 1))
        candidates = 1 + step * 3  # 1, 4, 7, 10
        feed = {"tokens": tokens, "candidates": np.array([candidates]), **cache, **source}
        log_probs, *new_cache, alignment, top_log_probs, top_ids = greedy.decoder.run(None, feed)
        cache = dict(zip(cache_names, new_cache, strict=True))
        # TopK: each row's best, best first, lower id first among equal values (a stable sort's order).
        expected_ids = np.argsort(-log_probs, axis=1, kind="stable")[:, :candidates]
        np.testing.assert_array_equal(top_ids, expected_ids)
        np.testing.assert_array_equal(top_log_probs, np.take_along_axis(log_probs, expected_ids, axis=1))
        assert log_probs.shape == (N, model.config.vocab_size)
        assert all(c.shape == (N, H, step + 1, Dh) for c in new_cache)
        assert alignment.shape == (N, S)
        with torch.no_grad():
            logits, t_self_k, t_self_v, t_align = model.decode(
                torch.from_numpy(tokens), t_cross_k, t_cross_v, t_mask, t_self_k, t_self_v, alignment_layer=layer
            )
        assert np.abs(log_probs - logits[:, -1].log_softmax(-1).numpy()).max() <= TOL
        for i in range(L):
            assert np.abs(cache[f"self_k_{i}"] - t_self_k[i].numpy()).max() <= TOL
            assert np.abs(cache[f"self_v_{i}"] - t_self_v[i].numpy()).max() <= TOL
        assert np.abs(alignment - t_align[:, -1].numpy()).max() <= TOL
        # Padded source positions get exactly zero weight; rows n*K..n*K+K-1 belong to sentence n.
        pad_rows = np.repeat(~src_mask, beams, axis=0)
        assert np.all(alignment[pad_rows] == 0.0)
        np.testing.assert_allclose(alignment.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize(("batch", "length", "beams"), [(1, 1, 1), (1, 100, 1), (7, 1, 1), (7, 100, 1), (7, 13, 3)])
def test_dynamic_shapes_match_pytorch(
    fp32_greedy: OnnxGreedy, tiny_model: Transformer, alignment_layer: int, batch: int, length: int, beams: int
):
    src = random_source(tiny_model, batch, length, seed=batch * length)
    run_steps(fp32_greedy, tiny_model, src, beams=beams, layer=alignment_layer, steps=4)


def test_padding_does_not_change_a_sentence(fp32_greedy: OnnxGreedy, tiny_model: Transformer):
    """A sentence decoded alone and padded inside a batch with a longer one gives the same steps."""
    batch = random_source(tiny_model, 2, 30, seed=3)
    n = int((batch[1] != tiny_model.config.pad_id).sum())
    alone = fp32_greedy.decode(batch[1:2, :n], [12])
    together = fp32_greedy.decode(batch, [12, 12])
    steps = alone.tokens.shape[1]
    np.testing.assert_array_equal(alone.tokens[0], together.tokens[1, :steps])
    assert np.abs(alone.log_probs[0] - together.log_probs[1, :steps]).max() <= 1e-5
    assert np.abs(alone.alignment[0] - together.alignment[1, :steps, :n]).max() <= 1e-6
