"""``export.quality``: every variant measured in the layout the service serves, the passes
alternating, the default CPU variant chosen by the rule, and ``python -m export.quality`` measuring
an existing bundle again without touching its graphs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_help import assert_documents_every_option, run_help

from engine.bundle import Quality, load_bundle
from export.quality import MAX_INT8_BLEU_LOSS, MIN_INT8_SPEEDUP, build_parser, cpu_default, main


def quality(bleu: float, seconds: float) -> Quality:
    return Quality(bleu=bleu, chrf=0.0, beam_size=5, sentences=1, seconds=seconds, bleu_signature="", chrf_signature="")


@pytest.mark.parametrize(
    ("int8", "default"),
    [
        ((39.0, 10 / MIN_INT8_SPEEDUP), "int8"),  # as good, fast enough
        ((39.0 - MAX_INT8_BLEU_LOSS, 8.0), "int8"),  # at the loss allowed
        ((39.0 - MAX_INT8_BLEU_LOSS - 0.01, 5.0), "fp32"),  # loses too much, however fast
        ((39.5, 10 / MIN_INT8_SPEEDUP + 0.01), "fp32"),  # better, but not fast enough to pay for itself
    ],
)
def test_int8_is_served_only_when_it_pays_for_its_loss_with_speed(int8: tuple[float, float], default: str) -> None:
    assert cpu_default({"fp32": quality(39.0, 10.0), "int8": quality(*int8)}) == default
    assert cpu_default({"fp32": quality(39.0, 10.0)}) == "fp32"


def test_an_existing_bundle_is_measured_again_in_place(
    tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    before = load_bundle(bundle).manifest
    assert main(["--bundle", str(bundle), "--eval-data", str(tiny_corpus), "--eval-beam-size", "2"]) == 0
    after = load_bundle(bundle).manifest  # the graphs' checksums still hold
    assert after.files == before.files
    qualities = {name: variant.quality["test_2016_flickr"] for name, variant in after.variants.items()}
    assert set(qualities) == {"fp32", "int8"}
    assert all(q.beam_size == 2 and q.sentences == 64 and q.seconds > 0 for q in qualities.values())
    assert after.default_variant.cpu == cpu_default(qualities)
    assert after.default_variant.cuda == before.default_variant.cuda
    assert f"default CPU variant: {after.default_variant.cpu}" in capsys.readouterr().out


def test_a_directory_without_the_test_set_is_a_clear_error(
    tiny_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--bundle", str(tiny_bundle), "--eval-data", str(tmp_path)])
    assert exit_.value.code == 2
    assert "test_2016_flickr.en: evaluation file not found" in capsys.readouterr().err


def test_the_help_documents_every_option() -> None:
    assert_documents_every_option(build_parser(), run_help("export.quality"))
