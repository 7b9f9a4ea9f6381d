"""``python -m benchmarks.repetition`` on the tiny model: each guard's BLEU, looping and runaway shares."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchmarks import repetition


def test_loops_are_runs_the_source_does_not_have() -> None:
    assert repetition.loops("Hello", "Allemmmmmmmer.")
    assert repetition.loops("a dog", "T-T-T-T-Ka.")
    assert not repetition.loops("ha ha ha ha", "ha ha ha ha")
    assert not repetition.loops("A dog runs.", "Ein Hund rennt.")
    assert repetition.runs_away("Hi", "x" * 27) and not repetition.runs_away("Hi", "x" * 26)


def test_every_guard_is_measured_on_both_sets(tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(tiny_corpus, data)
    shutil.copy(data / "val.de", data / "val.fr")  # the stress set's other-language sentences
    out = tmp_path / "repetition.json"
    argv = ["--models", str(tiny_bundle), "--data", str(data), "--guards", "none", "repeats2", "--limit", "16"]
    repetition.main([*argv, "--out", str(out)])
    results = json.loads(out.read_text())["results"]
    assert [r["guard"] for r in results] == ["none", "repeats2"]
    for r in results:
        assert r["bleu"] > 0 and r["stress_inputs"] == len(repetition.ODD) + 400
        assert 0 <= r["looping"] <= 1 and 0 <= r["runaway"] <= 1
    assert results[1]["looping"] <= results[0]["looping"]
