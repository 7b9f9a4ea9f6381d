"""``python -m model.evaluate`` given bad input: a one-line usage error (exit 2) naming the problem,
found before any translation, never a traceback or a silently wrong score."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from model.data import read_lines
from model.evaluate import main


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The last line of stderr of a run that must stop with exit status 2."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("python -m model.evaluate: error:"), line
    return line


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "no such checkpoint file"),
        ("directory", "is a directory, not a checkpoint file"),
        ("truncated", "not a readable checkpoint"),
        ("text", "not a readable checkpoint"),
        ("foreign", "not a model checkpoint of this project"),
    ],
)
def test_a_checkpoint_that_cannot_be_used_is_a_usage_error(
    tiny_checkpoint: Path,
    tiny_corpus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage: str,
    message: str,
) -> None:
    checkpoint = tmp_path / "checkpoint.pt"
    if damage == "directory":
        checkpoint.mkdir()
    elif damage == "truncated":
        checkpoint.write_bytes(tiny_checkpoint.read_bytes()[:2000])
    elif damage == "text":
        checkpoint.write_text("not a checkpoint\n")
    elif damage == "foreign":
        torch.save({"weights": torch.zeros(2)}, checkpoint)
    line = usage_error(capsys, ["--checkpoint", str(checkpoint), "--src", str(tiny_corpus / "val.en")])
    assert message in line and str(checkpoint) in line, line


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--beam-size", "0"], "argument --beam-size: 0 is below the minimum, 1"),
        (["--batch-size", "0"], "argument --batch-size: 0 is below the minimum, 1"),
        (["--limit", "-3"], "argument --limit: -3 is below the minimum, 0"),  # was the last 3 lines dropped
    ],
)
def test_options_out_of_range_are_usage_errors(
    tiny_checkpoint: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    argv = ["--checkpoint", str(tiny_checkpoint), "--src", str(tiny_corpus / "val.en"), *option]
    assert message in usage_error(capsys, argv)


def test_references_of_another_length_are_a_usage_error(
    tiny_checkpoint: Path, tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = tmp_path / "val.de"
    ref.write_text("".join(line + "\n" for line in read_lines(tiny_corpus / "val.de")[1:]), encoding="utf-8")
    argv = ["--checkpoint", str(tiny_checkpoint), "--src", str(tiny_corpus / "val.en"), "--ref", str(ref)]
    assert "val.en has 64 lines but" in usage_error(capsys, argv)


@pytest.mark.parametrize(("name", "message"), [("missing.en", "No such file"), ("binary.en", "not UTF-8 text")])
def test_an_unreadable_source_file_is_a_usage_error(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, message: str
) -> None:
    (tmp_path / "binary.en").write_bytes(b"\xff\xfe\x00A dog.\n")
    assert message in usage_error(capsys, ["--checkpoint", str(tiny_checkpoint), "--src", str(tmp_path / name)])


def test_an_output_in_a_missing_directory_is_refused_before_translating(
    tiny_checkpoint: Path, tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "no" / "such" / "hyps.de"
    argv = ["--checkpoint", str(tiny_checkpoint), "--src", str(tiny_corpus / "val.en"), "--out", str(out)]
    assert "does not exist" in usage_error(capsys, argv)


def test_one_translation_per_source_line(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "src.en"
    # A blank line, CRLF, and U+2028 inside a sentence: 4 lines in, 4 lines out.
    src.write_bytes("A dog runs.\r\n\nA cat\u2028sits.\nA boy plays.\n".encode())
    main(["--checkpoint", str(tiny_checkpoint), "--src", str(src), "--beam-size", "1"])
    assert len(capsys.readouterr().out.split("\n")) == 5  # 4 lines, each ended by a newline
