"""The PyTorch reference without its KV cache (benchmarks/nocache.py) decodes exactly as with it."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from benchmarks.nocache import PrefixRecomputingModel  # noqa: E402
from engine.tokenizer import Tokenizer  # noqa: E402
from model.checkpoint import load_checkpoint, model_from_checkpoint, write_spm  # noqa: E402
from model.data import pad  # noqa: E402
from model.decoding import DecodingOptions, beam_search  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.mark.parametrize("beam_size", [1, 4])
def test_decoding_without_cache_equals_decoding_with_it(
    tiny_checkpoint: Path, tiny_corpus: Path, tmp_path: Path, beam_size: int
) -> None:
    state = load_checkpoint(tiny_checkpoint)
    model = model_from_checkpoint(state)
    tokenizer = Tokenizer(write_spm(state, tmp_path / "spm.model"))
    texts = (tiny_corpus / "val.en").read_text(encoding="utf-8").splitlines()[:6]
    src = pad(tokenizer.encode_batch(texts))
    options = DecodingOptions(beam_size=beam_size, num_hypotheses=beam_size)
    cached = beam_search(model, src, options)
    recomputed = beam_search(PrefixRecomputingModel(model), src, options)
    for a, b in zip(cached, recomputed, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)
