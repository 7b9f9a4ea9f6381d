"""``python -m benchmarks.engine`` at tiny size (run by run_all, see conftest.py): every system at one
stream, ours and CTranslate2 at two, agreement with the PyTorch reference, a table per setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2", reason="the bench extra (ctranslate2) is not installed")

from benchmarks.engine import DEFAULT_SYSTEMS, REFERENCE, parse_args
from benchmarks.systems import MULTI_STREAM, SYSTEMS

BEAMS = (1, 4)


def results_by_streams(tiny_results: Path) -> dict[int, dict[tuple[str, int], dict]]:
    report = json.loads((tiny_results / "engine.json").read_text(encoding="utf-8"))
    return {
        setting["streams"]: {(r["system"], r["beam_size"]): r for r in setting["results"]}
        for setting in report["streams"]
    }


def test_every_system_runs_alone_and_the_multi_stream_ones_with_two_streams(tiny_results: Path) -> None:
    settings = results_by_streams(tiny_results)
    assert set(settings) == {1, 2}
    assert set(settings[1]) == {(name, beam) for name in DEFAULT_SYSTEMS for beam in BEAMS}
    multi_stream = {name for name in DEFAULT_SYSTEMS if SYSTEMS[name][0] in MULTI_STREAM}
    assert set(settings[2]) == {(name, beam) for name in multi_stream for beam in BEAMS}
    for results in settings.values():
        for r in results.values():
            assert r["sentences"] == 6 and r["tokens_per_s"] > 0 and r["peak_rss_mb"] > 0
            assert r["deterministic"]


def test_outputs_are_compared_with_the_pytorch_reference(tiny_results: Path) -> None:
    alone = results_by_streams(tiny_results)[1]
    for (name, _), r in alone.items():
        assert ("agreement" in r) == (name != REFERENCE)
    # Same algorithm, same model: only the cost per step differs.
    assert all(alone["torch-nocache", beam]["agreement"]["identical_rate"] == 1 for beam in BEAMS)


def test_the_report_has_a_table_per_stream_setting(tiny_results: Path) -> None:
    markdown = json.loads((tiny_results / "engine.json").read_text(encoding="utf-8"))["markdown"]
    one, two = markdown.split("### 2 streams × 1 thread")
    assert one.startswith("### 1 stream × 2 threads") and "| torch-nocache | 4 |" in one
    assert "| ct2-float32 | 4 |" in two and "torch" not in two


def test_baseline_systems_need_a_baseline_bundle(
    tiny_checkpoint: Path, tiny_bundle: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--src", str(tiny_corpus / "val.en"), "--ref", str(tiny_corpus / "val.de")]
    common = ["--checkpoint", str(tiny_checkpoint), "--bundle", str(tiny_bundle), *data, "--systems", "ours-int8"]
    with pytest.raises(SystemExit):
        parse_args([*common, "baseline-int8"])
    assert "need --baseline-bundle" in capsys.readouterr().err
    args = parse_args([*common, "baseline-int8", "--baseline-bundle", str(tiny_bundle)])
    assert args.systems == ["ours-int8", "baseline-int8"] and args.baseline_bundle == tiny_bundle


def test_several_batch_sizes_run_every_system_at_each_and_compare_the_fastest(
    tiny_checkpoint: Path, tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    from benchmarks.engine import main

    out = tmp_path / "engine.json"
    data = ["--src", str(tiny_corpus / "val.en"), "--ref", str(tiny_corpus / "val.de"), "--limit", "6"]
    main(["--checkpoint", str(tiny_checkpoint), "--bundle", str(tiny_bundle), *data, "--systems", "ours-int8",
          "ct2-int8", "--streams", "2", "--beams", "2", "--batch-size", "2", "4", "--rounds", "1",
          "--workdir", str(tmp_path / "work"), "--out", str(out)])  # fmt: skip
    (setting,) = json.loads(out.read_text(encoding="utf-8"))["streams"]
    speeds = {(r["system"], r["batch_size"]): r["sentences_per_s"] for r in setting["results"]}
    assert set(speeds) == {(name, batch) for name in ("ours-int8", "ct2-int8") for batch in (2, 4)}
    (pair,) = setting["best_against_best"]
    for family in ("ours", "ct2"):
        fastest = max((s, name, batch) for (name, batch), s in speeds.items() if name.startswith(family))
        assert (pair[f"{family}_sentences_per_s"], pair[family], pair[f"{family}_batch"]) == fastest
    assert pair["ratio"] == pair["ours_sentences_per_s"] / pair["ct2_sentences_per_s"]
    assert "| ours-int8 | 4 | 2 |" in setting["table"] and "Fastest against fastest" in setting["table"]
