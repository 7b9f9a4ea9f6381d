"""``python -m benchmarks.noisy_neighbour`` at tiny limits against the tiny model: each kind's heavy
requests are the largest the limits admit, and a short run of every kind reports the probe, the
heavy clients, the idle time after they hang up and the machine."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from benchmarks import heavy_requests, noisy_neighbour
from benchmarks.heavy_requests import KINDS, Limits, Request, Setup
from engine.documents import read_document
from engine.glossary import Glossary
from engine.markup import plain_text
from service.glossaries import MAX_ENTRIES

TINY_LIMITS = {
    "MT_MAX_CHARS": "600",
    "MT_MAX_TEXTS": "4",
    "MT_MAX_FILE_BYTES": "6000",
    "MT_MAX_DOCUMENT_BYTES": "8000",
    "MT_MAX_ALIGNMENT_CELLS": "20000",
}


@pytest.fixture(scope="module")
def setup(tiny_bundle: Path, tiny_corpus: Path) -> Setup:
    limits = Limits.of({"MT_MODEL_DIR": str(tiny_bundle), **TINY_LIMITS})
    return Setup(limits, (tiny_corpus / "train.en").read_text().splitlines(), glossary_id="g")


def first(kind: str, setup: Setup, count: int = 1) -> list[Request]:
    sent = heavy_requests.requests(kind, setup, random.Random(0))
    return [next(sent) for _ in range(count)]


def test_limits_are_the_services_settings(setup: Setup) -> None:
    settings = setup.limits.settings
    assert (settings.max_chars, settings.max_texts, settings.max_file_bytes) == (600, 4, 6000)
    assert setup.limits.paragraph_chars == 150 and setup.limits.beam > 0


def test_text_is_one_long_text_then_the_most_texts(setup: Setup) -> None:
    long, many = first("text", setup, 2)
    assert len(long.json["text"]) == 500 and long.json["text"].endswith("a" * 100)
    assert setup.limits.admitted([long.json["text"]], alignments=False)
    assert len(many.json["text"]) == 4 and sum(map(len, many.json["text"])) <= 600
    assert all(0 < len(t) <= heavy_requests.MANY_TEXT_CHARS for t in many.json["text"])


def test_the_long_text_is_cut_to_what_the_cost_estimate_admits(tiny_bundle: Path, tiny_corpus: Path) -> None:
    """With MT_MAX_BEAM_TOKENS tighter than MT_MAX_CHARS (the default limits are so), the long text
    is the longest that passes it, not a 413."""
    limits = Limits.of({"MT_MODEL_DIR": str(tiny_bundle), **TINY_LIMITS, "MT_MAX_BEAM_TOKENS": "800"})
    [long] = first("text", Setup(limits, (tiny_corpus / "train.en").read_text().splitlines()))
    text = long.json["text"]
    assert len(text) < 500 and limits.admitted([text], alignments=False)
    assert not limits.admitted([text + "a"], alignments=False)


def test_documents_fill_the_file_limits_with_paragraphs_the_requests_can_hold(setup: Setup) -> None:
    docx, md, srt = first("document", setup, 3)
    assert [r.file[0] for r in (docx, md, srt)] == ["heavy.docx", "heavy.md", "heavy.srt"]
    for request in md, srt:
        assert 6000 - 400 < len(request.file[1]) <= 6000  # within a paragraph of the limit
    for request in docx, md, srt:
        document = read_document(request.file[1], request.file[0], max_bytes=8000)
        assert all(0 < len(plain_text(t, document.format)) <= 150 for t in document.texts)
        assert request.path == "/v1/translate_file" and request.form == heavy_requests.PAIR
    assert (
        "decompressed" in docx.note
        and int(re.search(r"([\d,]+) bytes decompressed", docx.note)[1].replace(",", "")) > 7600
    )


@pytest.mark.parametrize("cap", [{"MT_MAX_DOCUMENT_CHARS": "1000"}, {"MT_MAX_DOCUMENT_TEXTS": "5"}])
def test_documents_stay_within_what_a_document_may_translate(
    tiny_bundle: Path, setup: Setup, cap: dict[str, str]
) -> None:
    limits = Limits.of({"MT_MODEL_DIR": str(tiny_bundle), **TINY_LIMITS, **cap})
    capped = Setup(limits, setup.sentences)
    settings = limits.settings
    for request in first("document", capped, 3):
        document = read_document(request.file[1], request.file[0], max_bytes=8000)
        chars = sum(len(plain_text(t, document.format)) for t in document.texts)
        assert 0 < len(document.texts) <= settings.max_document_texts and chars <= settings.max_document_chars
        assert len(document.texts) == settings.max_document_texts or chars > settings.max_document_chars - 150


def test_html_is_one_paragraph_of_inline_elements_at_the_limit(setup: Setup) -> None:
    [html] = first("html", setup)
    text = html.json["text"]
    assert 600 - 20 < len(text) <= 600 and html.json["format"] == "html"
    assert text.count("<b>") + text.count("<i>") == len(plain_text(text, "html").split()) > 30


def test_stream_is_the_longest_text(setup: Setup) -> None:
    [stream] = first("stream", setup)
    assert stream.path == "/v1/translate/stream" and 600 - 60 < len(stream.json["text"]) <= 600


def test_glossary_has_every_word_of_every_sentence_as_a_term(setup: Setup) -> None:
    entries = heavy_requests.glossary_entries(setup.sentences)
    assert len(entries) == MAX_ENTRIES
    glossary = Glossary.of({e["source"]: e["target"] for e in entries})  # refuses duplicate terms
    for sentence in setup.sentences:
        assert len(glossary.find(sentence)) >= len(re.findall(r"\w+", sentence)) // 3
    [request] = first("glossary", setup)
    assert request.json["glossary"] == "g" and len(request.json["text"]) == 4


def test_alignments_are_the_fewest_texts_whose_weights_are_admitted(setup: Setup) -> None:
    [request] = first("alignments", setup)
    texts = request.json["text"]
    assert request.json["return_alignments"] and setup.limits.admitted(texts, alignments=True)
    assert len(texts) > 1  # one text of 600 characters is over MT_MAX_ALIGNMENT_CELLS
    assert not setup.limits.admitted([" ".join(texts)], alignments=True)


def test_a_short_run_of_every_kind_reports_the_probe_the_heavy_clients_and_the_machine(
    tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "noisy.json"
    settings = [
        f"--setting={name}={value}"
        for name, value in TINY_LIMITS.items()
        if name not in ("MT_MAX_CHARS", "MT_MAX_TEXTS")
    ]
    argv = [
        "--heavy",
        *KINDS,
        "--clients",
        "1",
        "--duration",
        "1",
        "--probe-interval",
        "0.2",
        "--max-chars",
        "600",
        "--max-texts",
        "4",
        *settings,
    ]
    argv += [f"--setting=MT_MODEL_DIR={tiny_bundle}", "--src", str(tiny_corpus / "test_2016_flickr.en")]
    argv += ["--heavy-src", str(tiny_corpus / "train.en")]
    noisy_neighbour.main([*argv, "--workdir", str(tmp_path), "--out", str(out)])
    report = json.loads(out.read_text())
    assert [level["kind"] for level in report["levels"]] == list(KINDS)
    for level in report["levels"]:
        probe, heavy = level["probe"], level["heavy"]
        assert probe["answered"] >= 3 and not probe["failed"], level
        assert heavy["answered"] + heavy["unfinished"] >= 1 and not heavy["failed"], level
        assert 0 <= probe["p50_s"] <= probe["p99_s"] <= probe["max_s"]
        assert level["idle_after_hang_up_s"] >= 0 and level["service_tokens_per_s"] > 0
        assert set(level["machine"]) == {"steal_percent", "load_1m", "others_cpu_percent"}
    assert all(f"| {kind} | 1 |" in report["markdown"] for kind in KINDS)
