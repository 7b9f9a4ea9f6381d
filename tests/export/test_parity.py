"""The parity check itself: fp32 within 1e-4 of PyTorch over >= 50 real sentences, the cached step
equal to full recomputation, int8 reported; and the same greedy outputs as the PyTorch reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.tokenizer import Tokenizer
from export.parity import OnnxGreedy, ParityReport, check_parity
from model.data import pad, read_lines
from model.decoding import DecodingOptions, beam_search
from model.transformer import Transformer
from tests.export.conftest import greedy_for

TOL = 1e-4


@pytest.fixture(scope="module")
def sentence_ids(tiny_corpus: Path, tiny_tokenizer: Tokenizer) -> list[list[int]]:
    texts = read_lines(tiny_corpus / "val.en") + read_lines(tiny_corpus / "test_2016_flickr.en")
    return tiny_tokenizer.encode_batch(texts)


@pytest.fixture(scope="module")
def fp32_report(fp32_greedy: OnnxGreedy, tiny_model: Transformer, sentence_ids, alignment_layer: int) -> ParityReport:
    return check_parity(tiny_model, fp32_greedy, sentence_ids, alignment_layer=alignment_layer, alignment_heads=0)


def test_fp32_parity(fp32_report: ParityReport):
    report = fp32_report
    assert report.sentences >= 50
    assert report.positions > report.sentences  # several steps per sentence
    assert report.max_abs_logprob_diff <= TOL
    assert report.max_abs_cache_vs_full_diff <= TOL
    assert report.max_abs_alignment_diff <= TOL
    assert report.max_abs_logsumexp <= 1e-5
    assert len({tuple(o) for o in report.outputs}) > 10  # varied outputs, not one degenerate string


def test_int8_is_close_but_reported_only(
    tiny_bundle: Path, fp32_report: ParityReport, tiny_model: Transformer, sentence_ids, alignment_layer: int
):
    report = check_parity(
        tiny_model, greedy_for(tiny_bundle, "int8"), sentence_ids, alignment_layer=alignment_layer, alignment_heads=0
    )
    # Quantised: not exact, and the largest difference, over every vocabulary entry, depends on the
    # CPU's int8 kernels (1.5 on an Intel Xeon, 2.6 on an AMD EPYC). Not broken either: normalised,
    # and mostly the same greedy tokens as fp32 (0.70 of positions on an AMD EPYC for this barely trained
    # model; a broken graph would agree on about 1 in 150, the vocabulary size).
    assert report.max_abs_logprob_diff > 0
    assert report.max_abs_logsumexp <= 1e-3
    pairs = list(zip(report.outputs, fp32_report.outputs, strict=True))
    same = sum(x == y for a, b in pairs for x, y in zip(a, b, strict=False)) / sum(map(len, fp32_report.outputs))
    assert same >= 0.5, f"int8 greedy tokens agree with fp32 at {same:.0%} of positions"


def test_greedy_outputs_equal_pytorch_reference(
    fp32_report: ParityReport, tiny_model: Transformer, sentence_ids: list[list[int]]
):
    """model.decoding.beam_search with beam 1 and the ONNX greedy loop choose the same tokens."""
    reference = []
    for start in range(0, len(sentence_ids), 16):
        hyps = beam_search(tiny_model, pad(sentence_ids[start : start + 16]), DecodingOptions(beam_size=1))
        reference += [nbest[0].tokens for nbest in hyps]
    assert fp32_report.outputs == reference
