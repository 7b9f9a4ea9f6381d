"""``python -m export.shortlist`` given bad input: a one-line usage error (exit 2), and the bundle it
writes into stays loadable whatever goes wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_help import assert_documents_every_option, run_help

from engine.bundle import MANIFEST, BundleError, load_bundle
from export.shortlist import build, build_parser, main, write
from model.data import read_lines


@pytest.fixture
def bundle(tiny_bundle: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_bundle, tmp_path / "bundle"))


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("python -m export.shortlist: error:"), line
    return line


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--k", "0"], "argument --k: 0 is below the minimum, 1"),
        (["--frequent", "-1"], "argument --frequent: -1 is below the minimum, 0"),
        (["--dev-source", "val.en"], "--dev-source and --dev-target go together"),
    ],
)
def test_options_out_of_range_are_usage_errors_and_leave_the_bundle_alone(
    bundle: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    before = (bundle / MANIFEST).read_bytes()
    corpus = ["--source", str(tiny_corpus / "train.en"), "--target", str(tiny_corpus / "train.de")]
    assert message in usage_error(capsys, ["--bundle", str(bundle), *corpus, *option])
    assert (bundle / MANIFEST).read_bytes() == before
    load_bundle(bundle)


@pytest.mark.parametrize(
    ("damage", "message"),
    [("misaligned", "train.en has 1200 lines but"), ("binary", "not UTF-8 text"), ("no_bundle", "does not exist")],
)
def test_unusable_inputs_are_usage_errors(
    bundle: Path, tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, message: str
) -> None:
    target = tmp_path / "train.de"
    lines = read_lines(tiny_corpus / "train.de")
    if damage == "binary":
        target.write_bytes(b"\xff" * 100)
    else:
        target.write_text("".join(line + "\n" for line in lines[: -1 if damage == "misaligned" else None]))
    bundle_dir = tmp_path / "nowhere" if damage == "no_bundle" else bundle
    argv = ["--bundle", str(bundle_dir), "--source", str(tiny_corpus / "train.en"), "--target", str(target)]
    assert message in usage_error(capsys, argv)


def test_a_shortlist_the_manifest_refuses_leaves_the_bundle_as_it_was(bundle: Path) -> None:
    before = {p.name: p.read_bytes() for p in bundle.iterdir()}
    empty = build([[5, 3]], [[6, 3]], source_vocab=10, target_vocab=10, k=0, frequent=1)  # k = 0: invalid
    with pytest.raises(BundleError, match=r"shortlist\.k"):
        write(bundle, empty, default=False, bleu={})
    assert {p.name: p.read_bytes() for p in bundle.iterdir()} == before
    load_bundle(bundle)


def test_help_documents_every_option() -> None:
    assert_documents_every_option(build_parser(), run_help("export.shortlist"))
