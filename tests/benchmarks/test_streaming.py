"""``python -m benchmarks.streaming`` against the default service, on a few short texts."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import streaming


def test_the_first_event_the_done_event_and_the_whole_text_are_timed(tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "streaming.json"
    argv = ["--data", str(tiny_corpus), "--sentences", "3", "--texts", "2", "--workdir", str(tmp_path)]
    streaming.main([*argv, "--out", str(out)])
    report = json.loads(out.read_text())
    seconds = report["seconds"]
    assert [len(seconds[k]) for k in ("first", "done", "whole")] == [2, 2, 2]
    assert all(0 < f <= d for f, d in zip(seconds["first"], seconds["done"], strict=True))
    assert set(report["medians"]) == {"first", "done", "whole"}
