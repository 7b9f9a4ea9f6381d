"""``python -m benchmarks.noisy_neighbour`` at tiny limits against the default service: the probe's
and the heavy clients' outcomes are counted, and abandoned work is timed until the engine is idle."""

from __future__ import annotations

import json
import random
from pathlib import Path

from benchmarks import noisy_neighbour


def test_heavy_requests_are_the_largest_the_limits_admit(tiny_corpus: Path) -> None:
    sentences = (tiny_corpus / "test_2016_flickr.en").read_text().splitlines()
    long, many = noisy_neighbour.heavy_bodies(sentences, 20_000, 64, random.Random(0))
    assert len(long["text"]) == 19_900 and long["text"].endswith("a" * 1000)
    assert len(many["text"]) == 64 and sum(map(len, many["text"])) <= 20_000
    assert all(0 < len(t) <= noisy_neighbour.HEAVY_TEXT_CHARS for t in many["text"])


def test_a_short_run_reports_the_probe_the_heavy_clients_and_the_idle_time(tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "noisy.json"
    argv = ["--heavy", "1", "--duration", "2", "--max-chars", "600", "--max-texts", "4", "--abandon-after", "0.2"]
    src = tiny_corpus / "test_2016_flickr.en"
    noisy_neighbour.main([*argv, "--src", str(src), "--workdir", str(tmp_path), "--out", str(out)])
    [level] = json.loads(out.read_text())["levels"]
    assert level["heavy_clients"] == 1
    assert level["probe"]["answered"] >= 3 and not level["probe"]["failed"]
    assert level["heavy"]["answered"] >= 1 and not level["heavy"]["failed"]
    assert 0 <= level["probe"]["p50_s"] <= level["probe"]["p99_s"] <= level["probe"]["max_s"]
    assert level["abandoned_request_s"] > 0 and level["idle_after_abandon_s"] >= 0
