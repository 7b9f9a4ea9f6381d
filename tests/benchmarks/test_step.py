"""``python -m benchmarks.step``: two bundles' decoder-step graphs timed on the same inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import step
from engine.bundle import load_bundle


def test_both_graphs_of_each_variant_are_timed_at_every_row_count(tiny_bundle: Path, tmp_path: Path) -> None:
    baseline = shutil.copytree(tiny_bundle, tmp_path / "baseline")
    out = tmp_path / "step.json"
    step.main(["--bundle", str(tiny_bundle), "--baseline-bundle", str(baseline), "--rows", "4", "12",
               "--rounds", "2", "--calls", "2", "--out", str(out)])  # fmt: skip
    report = json.loads(out.read_text(encoding="utf-8"))
    variants = list(load_bundle(tiny_bundle).manifest.variants)
    assert [(r["variant"], r["rows"]) for r in report["results"]] == [(v, n) for v in variants for n in (4, 12)]
    for result in report["results"]:
        assert all(len(times) == 2 and min(times) > 0 for times in result["ms_all"].values())
        assert result["speedup"] == pytest.approx(result["ms"]["baseline"] / result["ms"]["bundle"])
    assert report["markdown"].count("\n") == 2 + len(report["results"]) - 1
    assert "benchmarks.step" in report["run"]["command"]


def test_the_inputs_are_a_decoding_state_the_graph_accepts(tiny_bundle: Path) -> None:
    bundle = load_bundle(tiny_bundle)
    measured = step.Step(bundle, "fp32")
    feed = step.step_inputs(bundle, rows=8, cached=3, source=5)
    outputs = dict(zip(measured.outputs, measured.session.run(measured.outputs, feed), strict=True))
    dims = bundle.manifest.dimensions
    assert outputs.pop("top_ids").shape == outputs.pop("top_log_probs").shape == (8, step.CANDIDATES)
    assert len(outputs) == 2 * dims.decoder_layers
    assert all(cache.shape == (8, dims.heads, 4, dims.d_head) for cache in outputs.values())


def test_bundles_of_different_shapes_are_refused(tiny_bundle: Path, tmp_path: Path) -> None:
    other = shutil.copytree(tiny_bundle, tmp_path / "other")
    manifest = json.loads((other / "manifest.json").read_text(encoding="utf-8"))
    manifest["dimensions"]["max_positions"] += 1
    (other / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(SystemExit, match="differ in shape"):
        step.main(["--bundle", str(tiny_bundle), "--baseline-bundle", str(other), "--out", str(tmp_path / "s.json")])
