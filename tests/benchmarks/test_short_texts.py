"""``python -m benchmarks.short_texts`` on a few captions per language and a short-text file of its own."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import short_texts

CAPTIONS = {
    "en": ["A dog is running through the green grass.", "Two children are playing football in the street."],
    "de": ["Ein Hund rennt durch das grüne Gras.", "Zwei Kinder spielen auf der Straße Fußball."],
    "fr": ["Un chien court dans l'herbe verte.", "Deux enfants jouent au football dans la rue."],
    "cs": ["Pes běží zelenou trávou.", "Dvě děti hrají na ulici fotbal."],
}
SHORT = "# a comment\n[en greeting]\nHello.\n\n[de ui]\nAbbrechen\nZur Kasse\n[ru ui]\nПривет\n"


def test_the_repository_s_short_texts_are_read_by_language_and_kind() -> None:
    texts = short_texts.read_short_texts()
    assert len(texts) >= 700 and len({text for _, _, text in texts}) == len(texts)  # no text twice
    assert {kind for _, kind, _ in texts} == {"greeting", "ui", "query"}
    assert sum(language in ("en", "de") for language, _, _ in texts) >= 300
    assert ("en", "greeting", "Hello.") in texts and ("de", "ui", "Abbrechen") in texts


def test_every_text_is_counted_once_per_target(tmp_path: Path) -> None:
    for language, lines in CAPTIONS.items():
        (tmp_path / f"val.{language}").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    (tmp_path / "short.txt").write_text(SHORT, encoding="utf-8")
    out = tmp_path / "short_texts.json"
    short_texts.main(["--data", str(tmp_path), "--splits", "val", "--short-texts", str(tmp_path / "short.txt"),
                      "--out", str(out)])  # fmt: skip
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["run"]["command"].startswith("python -m benchmarks.short_texts")
    into_en, into_de = (report["short_texts"]["outcomes"][t] for t in ("en", "de"))
    assert into_de["en"]["counts"]["from own"] == 1 and into_en["de"]["counts"]["from own"] == 2
    assert into_en["ru"]["counts"] == {"refused": 1, "guessed": 0} and into_en["ru"]["shares"]["refused"] == 1.0
    captions = report["captions"]["outcomes"]
    assert captions["de"]["en"]["counts"]["from own"] == 2 and captions["en"]["en"]["counts"]["kept"] == 2
    assert all(captions[t][lang]["shares"]["refused"] == 1.0 for t in ("en", "de") for lang in ("fr", "cs"))
    assert report["short_texts"]["us_per_text"] > 0 and "| en | de | 2 |" in report["markdown"]
