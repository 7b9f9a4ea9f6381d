"""``python -m benchmarks.memory`` at tiny size against a repository of the tiny model: every request
answered (the .docx refused by MT_MAX_DOCUMENT_BYTES, a text as long as the limits admit answered),
RSS sampled in every process through the run and after it, the service ready at the end. And the
parts that need no server: the texts and the .docx bomb."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from benchmarks import memory
from benchmarks.heavy_requests import Limits
from service.settings import Settings
from tests.conftest import relabelled_bundle


@pytest.fixture(scope="module")
def measured(tiny_bundle: Path, tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict]:
    """The benchmark's exit code and result file."""
    root = tmp_path_factory.mktemp("memory")
    relabelled_bundle(tiny_bundle, root / "models" / "en-de", "tiny-en-de", ["en"], ["de"])
    out = root / "memory.json"
    exit_code = memory.main(["--data", str(tiny_corpus), "--models-dir", str(root / "models"), "--long-texts", "2",
                             "--long-chars", "600", "--admitted-texts", "1",
                             "--docx-mb", "24", "--beam-texts", "4", "--beam-chars", "100",
                             "--settle-s", "1", "--workdir", str(root), "--out", str(out)])  # fmt: skip
    return exit_code, json.loads(out.read_text(encoding="utf-8"))


def test_every_request_is_answered_and_the_service_stays_within_the_targets(measured: tuple[int, dict]) -> None:
    exit_code, report = measured
    assert exit_code == 0 and report["passed"], report["markdown"]
    outcomes = [(r["status"], r["error_type"]) for r in report["requests"]]
    assert outcomes == [(200, None), (200, None), (200, None), (413, "payload_too_large"), (200, None)]
    assert report["run"]["command"].startswith("python -m benchmarks.memory --data")
    assert "cpu_model" in report["run"]["machine"]


def test_rss_is_sampled_in_every_process_through_the_run_and_after_it(measured: tuple[int, dict]) -> None:
    _, report = measured
    *processes, total = report["memory"]
    roles = [p["role"] for p in processes]
    assert roles.count("http") == 1 and roles.count("engine") >= 1 and total["role"] == "all"
    assert roles.count("documents") == 1  # the .docx is read in a process of its own
    last_answer = max(r["started_s"] + r["seconds"] for r in report["requests"])
    # A process that lives through the run (not one started and ended within it, as a helper
    # process of a library may be) is sampled every 0.1 s for over a second after the last answer.
    for process in [p for p in report["memory"] if p["role"] in ("http", "engine", "all")]:
        assert len(process["series"]) >= 10
        assert 0 < process["start_mb"] <= process["peak_mb"] and process["after_mb"] is not None
        assert process["series"][-1][0] >= last_answer + 1
    assert total["peak_mb"] >= sum(p["peak_mb"] for p in processes if p["role"] == "http")


def test_texts_are_distinct_and_of_the_length_asked_for() -> None:
    sentences = [f"Sentence number {i} is here." for i in range(50)]
    texts = list(memory.joined_texts(sentences, 3, 200))
    assert len(set(texts)) == 3 and all(180 <= len(t) <= 200 for t in texts)
    assert texts[0].startswith("Sentence number 0 ") and not texts[1].startswith("Sentence number 0 ")


def test_an_admitted_text_is_the_longest_the_default_limits_admit(tiny_bundle: Path) -> None:
    """Each text fits MT_MAX_ALIGNMENT_CELLS as the service counts it, and one more sentence would not."""
    limits = Limits.of({"MT_MODEL_DIR": str(tiny_bundle)})
    tokenizer = limits.tokenizer
    sentences = [f"A man number {i} runs in the park with a red ball." for i in range(2000)]
    cells = Settings.model_fields["max_alignment_cells"].default
    texts = list(memory.admitted_texts(sentences, 2, limits))
    assert len(set(texts)) == 2
    for text in texts:
        nxt = sentences[max(i for i, sentence in enumerate(sentences) if text.endswith(sentence)) + 1]
        assert (len(tokenizer.encode(text)) - 1) ** 2 <= cells < (len(tokenizer.encode(f"{text} {nxt}")) - 1) ** 2


def test_the_word_file_expands_to_the_size_asked_for_from_a_small_one() -> None:
    bomb = memory.word_bomb(8 << 20)
    with zipfile.ZipFile(io.BytesIO(bomb)) as package:
        sizes = {info.filename: info.file_size for info in package.infolist()}
        assert package.read("word/document.xml").endswith(b"</w:body></w:document>")
    assert {"[Content_Types].xml", "_rels/.rels", "word/document.xml"} <= set(sizes)
    assert 8 << 20 <= sizes["word/document.xml"] <= 9 << 20 and len(bomb) < 1 << 20
