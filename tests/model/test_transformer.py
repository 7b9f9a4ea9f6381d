"""The attention math, masks and the cached decoder of model/transformer.py."""

from __future__ import annotations

import math

import pytest
import torch

from model.transformer import ModelConfig, build_model, scaled_dot_product_attention, sinusoidal_positions

CONFIG = ModelConfig(vocab_size=50, d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0)


@pytest.fixture(params=[True, False], ids=["pre_norm", "post_norm"])
def model(request: pytest.FixtureRequest) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelConfig(**{**CONFIG.to_dict(), "pre_norm": request.param})
    return build_model(cfg).eval()


def random_batch(B: int = 3, S: int = 7, T: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, CONFIG.vocab_size, (B, S), generator=g)
    src[1, 4:] = CONFIG.pad_id  # one padded sentence
    tgt = torch.randint(4, CONFIG.vocab_size, (B, T), generator=g)
    tgt[:, 0] = CONFIG.bos_id
    return src, tgt


def test_scores_are_scaled_by_inverse_sqrt_d_head() -> None:
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    out, weights = scaled_dot_product_attention(q, k, v, None)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(out, expected @ v)
    unscaled = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    assert not torch.allclose(weights, unscaled)


def test_masked_keys_get_exactly_zero_weight_and_all_masked_rows_no_nan() -> None:
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    mask = torch.tensor([[True, True, False, True, False]] * 2 + [[False] * 5])  # (Tq=3, Tk=5)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(weights[..., :2, [2, 4]] == 0)
    torch.testing.assert_close(weights[..., :2, :].sum(-1), torch.ones(1, 2, 2))
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert torch.all(weights[..., 2, :] == 0) and torch.all(out[..., 2, :] == 0)


def test_sinusoidal_positions_follow_the_paper() -> None:
    pe = sinusoidal_positions(ModelConfig(vocab_size=8, d_model=8, n_heads=2, max_positions=10))
    pos, i = 7, 1
    assert pe[pos, 2 * i].item() == pytest.approx(math.sin(pos / 10000 ** (2 * i / 8)), abs=1e-6)
    assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos / 10000 ** (2 * i / 8)), abs=1e-6)


def test_shapes_through_encoder_and_decoder(model: torch.nn.Module) -> None:
    src, tgt = random_batch()
    L, H, Dh = CONFIG.n_decoder_layers, CONFIG.n_heads, CONFIG.d_head
    memory, src_mask = model.encode(src)
    assert memory.shape == (3, 7, CONFIG.d_model) and src_mask.shape == (3, 7)
    cross_k, cross_v = model.cross_kv(memory)
    assert len(cross_k) == len(cross_v) == L
    assert all(t.shape == (3, H, 7, Dh) for t in cross_k + cross_v)
    self_k, self_v = model.empty_cache(3)
    logits, new_k, new_v, attn = model.decode(tgt, cross_k, cross_v, src_mask, self_k, self_v)
    assert logits.shape == (3, 6, CONFIG.vocab_size)
    assert len(new_k) == len(new_v) == L
    assert all(t.shape == (3, H, 6, Dh) for t in new_k + new_v)
    assert attn.shape == (3, 6, 7)
    torch.testing.assert_close(attn.sum(-1), torch.ones(3, 6))
    assert torch.all(attn[1, :, 4:] == 0), "padded source positions must get zero cross-attention"


def test_decoder_does_not_look_at_future_tokens(model: torch.nn.Module) -> None:
    src, tgt = random_batch()
    changed = tgt.clone()
    changed[:, 4:] = 5
    before, after = model(src, tgt), model(src, changed)
    torch.testing.assert_close(before[:, :4], after[:, :4])
    assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_encoder_ignores_padding_content(model: torch.nn.Module) -> None:
    src, _ = random_batch()
    memory, _ = model.encode(src)
    # Make the padded positions real tokens: the other positions of that sentence must change.
    unpadded = src.clone()
    unpadded[1, 4:] = 9
    assert not torch.allclose(model.encode(unpadded)[0][1, :4], memory[1, :4])
    # Trimming the padding away gives the same encoding of the real tokens.
    torch.testing.assert_close(model.encode(src[1:2, :4])[0][0], memory[1, :4], atol=1e-5, rtol=1e-5)


def test_incremental_decoding_equals_teacher_forcing(model: torch.nn.Module) -> None:
    src, tgt = random_batch()
    memory, src_mask = model.encode(src)
    cross_k, cross_v = model.cross_kv(memory)
    full_logits, _, _, full_attn = model.decode(tgt, cross_k, cross_v, src_mask, *model.empty_cache(3))
    self_k, self_v = model.empty_cache(3)
    for t in range(tgt.size(1)):
        logits, self_k, self_v, attn = model.decode(tgt[:, t : t + 1], cross_k, cross_v, src_mask, self_k, self_v)
        assert all(k.size(2) == t + 1 for k in self_k)
        assert (logits[:, 0] - full_logits[:, t]).abs().max() <= 1e-5
        assert (attn[:, 0] - full_attn[:, t]).abs().max() <= 1e-5


def test_beams_share_cross_keys_values_without_copies(model: torch.nn.Module) -> None:
    """K beams per sentence against (B, ...) cross keys equal K explicit copies of them."""
    src, tgt = random_batch()
    K = 4
    memory, src_mask = model.encode(src)
    cross_k, cross_v = model.cross_kv(memory)
    rows = tgt.repeat_interleave(K, dim=0)
    rows[:, -1] = torch.arange(rows.size(0)) % 20 + 4  # beams differ
    shared = model.decode(rows, cross_k, cross_v, src_mask, *model.empty_cache(rows.size(0)))
    copied = model.decode(
        rows,
        [k.repeat_interleave(K, dim=0) for k in cross_k],
        [v.repeat_interleave(K, dim=0) for v in cross_v],
        src_mask.repeat_interleave(K, dim=0),
        *model.empty_cache(rows.size(0)),
    )
    torch.testing.assert_close(shared, copied, atol=1e-5, rtol=1e-5)


def test_tied_embeddings_share_one_matrix() -> None:
    model = build_model(CONFIG)
    assert model.output_proj.weight is model.src_embed.weight is model.tgt_embed.weight
    untied = build_model(ModelConfig(**{**CONFIG.to_dict(), "tie_embeddings": False}))
    assert untied.output_proj.weight is not untied.tgt_embed.weight
    assert untied.src_embed.weight is not untied.tgt_embed.weight
    separate = build_model(ModelConfig(**{**CONFIG.to_dict(), "tie_embeddings": False, "tie_output": True}))
    assert separate.output_proj.weight is separate.tgt_embed.weight is not separate.src_embed.weight


def test_config_rejects_heads_that_do_not_divide_d_model() -> None:
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(vocab_size=10, d_model=30, n_heads=4)
