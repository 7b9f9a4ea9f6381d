"""``python -m export`` given bad input: options out of range are usage errors (exit 2), unusable
files and places a one-line failure (exit 1) before the export's work, and nothing is left behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.bundle import load_bundle
from export.__main__ import main


def failure(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """stderr of an export that must fail with status 1, which must be one line."""
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("export failed:"), err
    return err


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--eval-beam-size", "0"], "argument --eval-beam-size: 0 is below the minimum, 1"),
        (["--alignment-heads", "-1"], "argument --alignment-heads: -1 is below the minimum, 0"),
        (["--alignment-layer", "-1"], "argument --alignment-layer: -1 is below the minimum, 0"),
        (["--parity-sentences", "10"], "argument --parity-sentences: 10 is below the minimum, 50"),
    ],
)
def test_options_out_of_range_are_usage_errors(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path / "bundle"), *option])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_binary_parity_data_fails_cleanly(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parity = tmp_path / "parity.en"
    parity.write_bytes(bytes(range(128, 256)) * 4)
    argv = ["--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path / "bundle"), "--parity-data", str(parity)]
    assert "parity.en: not UTF-8 text" in failure(capsys, argv)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parity.en"]


def test_an_output_that_cannot_be_created_fails_cleanly(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("a file, not a directory")
    out = tmp_path / "file" / "bundle"
    assert f"{out}: cannot write a bundle there" in failure(
        capsys, ["--checkpoint", str(tiny_checkpoint), "--out", str(out)]
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--source-lang", "en,fr"], "'en,fr' is not a language code"),
        (["--target-lang", "de "], "'de ' is not a language code"),
        (["--source-lang", "de"], "both 'de': the bundle would serve no pair"),
    ],
)
def test_languages_a_training_checkpoint_cannot_serve_are_refused(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    argv = ["--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path / "bundle"), *option]
    assert message in failure(capsys, argv)
    assert not any(tmp_path.iterdir())


def test_the_current_directory_as_out(tiny_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "bundle"
    out.mkdir()
    monkeypatch.chdir(out)
    assert main(["--checkpoint", str(tiny_checkpoint), "--out", ".", "--source-lang", "en-GB"]) == 0
    assert load_bundle(out).manifest.languages.source[0].code == "en-GB"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]  # no staging or old directory left


def test_binary_eval_data_fails_cleanly(
    tiny_checkpoint: Path, tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    shutil.copytree(tiny_corpus, data)
    (data / "test_2016_flickr.de").write_bytes(b"\xc3\x28 broken\n" * 64)
    argv = ["--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path / "bundle"), "--eval-data", str(data)]
    assert "test_2016_flickr.de: not UTF-8 text" in failure(capsys, argv)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


@pytest.mark.parametrize("option", [["--version", ""], ["--name", " "]])
def test_a_blank_name_or_version_is_refused(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str]
) -> None:
    argv = ["--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path / "bundle"), *option]
    assert "must not be blank" in failure(capsys, argv)
    assert not any(tmp_path.iterdir())
