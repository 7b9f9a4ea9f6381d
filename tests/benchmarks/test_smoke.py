"""Smoke tests of the benchmark scripts on the tiny checkpoint and bundle: every script runs end to
end on a few sentences, and the CTranslate2 conversion reproduces the PyTorch model exactly.

Timings are not checked (they mean nothing on a busy CI machine); the numbers live in
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ctranslate2 = pytest.importorskip("ctranslate2", reason="the bench extra (ctranslate2) is not installed")
torch = pytest.importorskip("torch")

from benchmarks import composition, engine, load, plot, ratio  # noqa: E402
from benchmarks.agreement import token_log_probs  # noqa: E402
from benchmarks.ct2_convert import convert  # noqa: E402
from benchmarks.nocache import PrefixRecomputingModel  # noqa: E402
from benchmarks.systems import SYSTEMS  # noqa: E402
from engine.tokenizer import EOS_ID, Tokenizer, normalize_text  # noqa: E402
from model.checkpoint import load_checkpoint, model_from_checkpoint, write_spm  # noqa: E402
from model.data import pad  # noqa: E402
from model.decoding import DecodingOptions, beam_search, max_decoding_length  # noqa: E402

SENTENCES = 8


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models gain nothing from threads, and OpenMP threads spinning on a busy 2-core machine
    slow everything down many times over."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def ct2_model(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return convert(tiny_checkpoint, tmp_path_factory.mktemp("ct2") / "float32")


def sources(tiny_corpus: Path, n: int = SENTENCES) -> list[str]:
    return (tiny_corpus / "val.en").read_text(encoding="utf-8").splitlines()[:n]


@pytest.mark.parametrize("beam_size", [1, 4])
def test_ct2_conversion_reproduces_pytorch_decoding(
    ct2_model: Path, tiny_checkpoint: Path, tiny_corpus: Path, beam_size: int
) -> None:
    model = model_from_checkpoint(load_checkpoint(tiny_checkpoint))
    tokenizer = Tokenizer(ct2_model / "spm.model")
    translator = ctranslate2.Translator(str(ct2_model), intra_threads=1)
    eos = tokenizer.sp.id_to_piece(EOS_ID)
    options = DecodingOptions(beam_size=beam_size)
    for text in sources(tiny_corpus):
        src_ids = tokenizer.encode(text)
        expected = beam_search(model, pad([src_ids]), options)[0][0].tokens
        # The reference forces EOS at its cap; CTranslate2 stops one token earlier without it.
        cap = max_decoding_length(len(src_ids), options, model.config.max_positions)
        result = translator.translate_batch(
            [tokenizer.sp.encode(normalize_text(text), out_type=str)],
            beam_size=beam_size,
            min_decoding_length=0,
            max_decoding_length=cap - 1,
            return_end_token=True,
        )[0]
        assert [tokenizer.sp.piece_to_id(p) for p in result.hypotheses[0] if p != eos] == expected, text


def test_ct2_conversion_gives_the_same_log_probabilities(ct2_model: Path, tiny_checkpoint: Path, tiny_corpus: Path):
    model = model_from_checkpoint(load_checkpoint(tiny_checkpoint))
    tokenizer = Tokenizer(ct2_model / "spm.model")
    translator = ctranslate2.Translator(str(ct2_model), intra_threads=1)
    texts = sources(tiny_corpus, 4)
    targets = [tokenizer.encode(t)[:-1][::-1] for t in texts]  # any target will do: reversed sources
    scored = translator.score_batch(
        [tokenizer.sp.encode(normalize_text(t), out_type=str) for t in texts],
        [tokenizer.pieces(ids) for ids in targets],
    )
    for text, target, result in zip(texts, targets, scored, strict=True):
        expected = token_log_probs(model, tokenizer.encode(text), target)
        assert result.log_probs == pytest.approx(expected, abs=1e-4)


def test_ct2_conversion_errors(tiny_checkpoint: Path, ct2_model: Path, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="already exists"):
        convert(tiny_checkpoint, ct2_model)
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        convert(tmp_path / "missing.pt", tmp_path / "out")
    with pytest.raises(ValueError, match="quantization"):
        convert(tiny_checkpoint, tmp_path / "out", quantization="int4")


@pytest.mark.parametrize("beam_size", [1, 4])
def test_decoding_without_cache_equals_decoding_with_it(
    tiny_checkpoint: Path, tiny_corpus: Path, tmp_path: Path, beam_size: int
) -> None:
    state = load_checkpoint(tiny_checkpoint)
    model = model_from_checkpoint(state)
    tokenizer = Tokenizer(write_spm(state, tmp_path / "spm.model"))
    src = pad(tokenizer.encode_batch(sources(tiny_corpus, 6)))
    options = DecodingOptions(beam_size=beam_size, num_hypotheses=beam_size)
    cached = beam_search(model, src, options)
    recomputed = beam_search(PrefixRecomputingModel(model), src, options)
    for a, b in zip(cached, recomputed, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)


def test_engine_benchmark_runs_every_system(
    tiny_checkpoint: Path, tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "engine.json"
    engine.main([
        "--checkpoint", str(tiny_checkpoint), "--bundle", str(tiny_bundle),
        "--src", str(tiny_corpus / "val.en"), "--ref", str(tiny_corpus / "val.de"), "--limit", "6",
        "--rounds", "1", "--threads", "1", "--workdir", str(tmp_path / "work"), "--json", str(out),
    ])  # fmt: skip
    report = json.loads(out.read_text())
    results = {(r["system"], r["beam_size"]): r for r in report["results"]}
    assert set(results) == {(name, beam) for name in SYSTEMS for beam in (1, 4)}
    for (name, _), r in results.items():
        assert r["sentences"] == 6 and r["tokens_per_s"] > 0 and r["peak_rss_mb"] > 0
        assert r["deterministic"]
        if name != engine.REFERENCE:
            assert 0 <= r["agreement"]["identical_rate"] <= 1
    # Same algorithm, same model: only the cost per step differs.
    assert results["torch-nocache", 4]["agreement"]["identical_rate"] == 1
    assert "| ct2-float32 | 4 |" in report["table"]


def test_engine_benchmark_with_streams(tiny_checkpoint: Path, tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path):
    """Two batches at a time: our engine's streams, CTranslate2's inter_threads (asynchronous batches)."""
    out = tmp_path / "engine.json"
    engine.main([
        "--checkpoint", str(tiny_checkpoint), "--bundle", str(tiny_bundle),
        "--src", str(tiny_corpus / "val.en"), "--ref", str(tiny_corpus / "val.de"), "--limit", "12",
        "--systems", "ours-fp32", "ct2-float32", "--beams", "4", "--batch-size", "4",
        "--rounds", "1", "--threads", "2", "--streams", "2", "--workdir", str(tmp_path / "work"), "--json", str(out),
    ])  # fmt: skip
    report = json.loads(out.read_text())
    assert report["settings"]["streams"] == 2
    results = {r["system"]: r for r in report["results"]}
    assert set(results) == {"ours-fp32", "ct2-float32"}
    assert all(r["sentences"] == 12 and r["deterministic"] for r in results.values())


def test_load_benchmark_and_plot(tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    load.main([
        "--bundle", str(tiny_bundle), "--src", str(tiny_corpus / "val.en"), "--limit", "16",
        "--concurrency", "1", "4", "--duration", "1", "--warmup", "0.2", "--threads", "1",
        "--workdir", str(tmp_path / "work"), "--json", str(out),
    ])  # fmt: skip
    report = json.loads(out.read_text())
    assert report["offline"]["throughput"] > 0
    levels = {(lv["batching"], lv["concurrency"]): lv for lv in report["levels"]}
    assert set(levels) == {(mode, c) for mode in ("on", "off") for c in (1, 4)}
    for lv in levels.values():
        assert lv["errors"] == 0 and lv["requests"] > 0
        assert lv["p50_s"] <= lv["p95_s"] <= lv["p99_s"]
        # The clients' share can round to 0: the raw client uses ~0.13 ms per request, under one
        # 10 ms CPU-accounting tick in a 1 s window; the engine's cannot.
        assert set(lv["cpu_percent"]) == set(load.CPU_SPLIT) and min(lv["cpu_percent"].values()) >= 0
        assert lv["cpu_percent"]["engine"] > 0, lv["cpu_percent"]
    assert levels["off", 4]["mean_batch_sentences"] == 1  # MT_MAX_BATCH_SENTENCES=1

    ratio_out = tmp_path / "ratio.json"
    ratio.main([
        "--rounds", "1", "--setting", "1:5:2", "--concurrency", "2", "--json", str(ratio_out),
        "--bundle", str(tiny_bundle), "--src", str(tiny_corpus / "val.en"), "--limit", "16",
        "--duration", "1", "--warmup", "0.2", "--workdir", str(tmp_path / "work"),
    ])  # fmt: skip
    assert json.loads(ratio_out.read_text())["median_ratio"]["1:5:2"] > 0

    png = tmp_path / "load.png"
    plot.main(["--load-json", str(out), "--out", str(png)])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_composition_benchmark(tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "composition.json"
    composition.main([
        "--bundle", str(tiny_bundle), "--src", str(tiny_corpus / "val.en"), "--limit", "24",
        "--batch", "6", "--streams", "2", "--rounds", "1", "--json", str(out),
    ])  # fmt: skip
    results = {r["policy"]: r for r in json.loads(out.read_text())["results"]}
    assert set(results) == {"sorted 6", "arrival 6"}
    for r in results.values():
        assert r["sentences_per_s"] > 0 and r["source_padding"] >= 1
        # Every sentence is decoded for at least one step, on at least one row per step.
        assert r["steps_per_sentence"] > 0 and r["rows_per_step"] >= 1
        assert r["rows_per_sentence"] >= 1
    # Length-sorted batches of a fixed size pad the least of any cut into such batches.
    assert results["sorted 6"]["source_padding"] <= results["arrival 6"]["source_padding"]
