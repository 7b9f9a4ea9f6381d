"""``python -m export`` end to end on the tiny checkpoint: the bundle, --eval-data quality and the
default variant rule, refusal to overwrite, --force, and clear failures that leave nothing behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from cli_help import assert_documents_every_option, run_help
from repo_root import REPO, python_env

from engine.bundle import load_bundle, sha256_file
from export.__main__ import build_parser, main
from export.graph_files import EXTERNAL_MIN_BYTES


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = python_env()
    return subprocess.run(
        [sys.executable, "-m", "export", *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def evaluated_bundle(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_corpus: Path) -> Path:
    out = tmp_path_factory.mktemp("cli") / "bundle"
    result = run_cli(
        "--checkpoint", tiny_checkpoint, "--out", out, "--int8", "--eval-data", tiny_corpus, "--version", "0.1.0"
    )
    assert result.returncode == 0, result.stderr
    assert "parity fp32: 64 sentences" in result.stdout
    return out


def test_cli_writes_a_valid_bundle_with_quality(evaluated_bundle: Path):
    manifest = load_bundle(evaluated_bundle).manifest
    assert (manifest.name, manifest.version, manifest.languages.source[0].code) == ("mt-en-de", "0.1.0", "en")
    assert set(manifest.variants) == {"fp32", "int8"}
    assert manifest.parity.max_abs_logprob_diff <= 1e-4 and manifest.parity.sentences == 64
    scores = {name: v.quality["test_2016_flickr"] for name, v in manifest.variants.items()}
    for quality in scores.values():
        assert quality.sentences == 64 and quality.beam_size == 5
        assert quality.bleu_signature.startswith("nrefs:1") and "nc:6" in quality.chrf_signature
    int8_ok = (
        scores["fp32"].bleu - scores["int8"].bleu <= 0.5 and scores["int8"].seconds * 1.1 <= scores["fp32"].seconds
    )
    assert manifest.default_variant.cpu == ("int8" if int8_ok else "fp32")
    assert manifest.default_variant.cuda == "fp32"


def locations(graph: onnx.ModelProto) -> dict[str, str]:
    """Each externally stored tensor's file."""
    return {t.name: e.value for t in graph.graph.initializer for e in t.external_data if e.key == "location"}


def test_weights_are_stored_beside_the_graphs(evaluated_bundle: Path):
    """Every graph keeps its weights in data files (checksummed in the manifest), so that no step
    of the export or of loading meets protobuf's 2 GB limit, which NLLB-600M exceeds; the tied
    embedding table (and the position table) is stored once, in the encoder's file, and the decoder
    reads it from there."""
    manifest = load_bundle(evaluated_bundle).manifest
    for variant in manifest.variants.values():
        names = (variant.encoder, variant.decoder)
        graphs = {name: onnx.load(evaluated_bundle / name, load_external_data=False) for name in names}
        for name, graph in graphs.items():
            inline = [t.name for t in graph.graph.initializer if len(t.raw_data) > EXTERNAL_MIN_BYTES]
            assert not inline, f"{name}: weights inside the graph: {inline[:3]}"
            data = evaluated_bundle / f"{name}.data"
            assert manifest.files[data.name] == sha256_file(data)
            assert data.stat().st_mode == (evaluated_bundle / name).stat().st_mode  # readable as the graph is
        encoder, decoder = graphs.values()
        assert set(locations(encoder).values()) == {f"{variant.encoder}.data"}
        assert set(locations(decoder).values()) == {f"{variant.encoder}.data", f"{variant.decoder}.data"}
        tables = {node.input[0] for node in decoder.graph.node if node.op_type == "Gather"} & set(locations(decoder))
        assert tables and {locations(decoder)[t] for t in tables} == {f"{variant.encoder}.data"}


def test_refuses_to_overwrite_without_force(evaluated_bundle: Path, tiny_checkpoint: Path, capsys):
    before = (evaluated_bundle / "manifest.json").read_bytes()
    assert main(["--checkpoint", str(tiny_checkpoint), "--out", str(evaluated_bundle)]) == 1
    assert "already exists; pass --force" in capsys.readouterr().err
    assert (evaluated_bundle / "manifest.json").read_bytes() == before


def test_parity_failure_is_reported_and_keeps_the_old_bundle(evaluated_bundle: Path, tiny_checkpoint: Path, capsys):
    before = (evaluated_bundle / "manifest.json").read_bytes()
    code = main(
        ["--checkpoint", str(tiny_checkpoint), "--out", str(evaluated_bundle), "--force", "--parity-tolerance", "1e-12"]
    )
    assert code == 1
    assert "parity failed" in capsys.readouterr().err
    assert (evaluated_bundle / "manifest.json").read_bytes() == before
    assert [p.name for p in evaluated_bundle.parent.iterdir()] == ["bundle"]  # no staging left behind


def test_force_replaces_a_bundle(tmp_path: Path, tiny_checkpoint: Path):
    out = tmp_path / "bundle"
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    assert main(["--checkpoint", str(tiny_checkpoint), "--out", str(out), "--force", "--name", "replaced"]) == 0
    manifest = load_bundle(out).manifest
    assert manifest.name == "replaced" and set(manifest.variants) == {"fp32"}


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "checkpoint not found"),
        ("garbage", "cannot read the checkpoint"),
        ("not_a_bundle", "holds no bundle; refusing"),
    ],
)
def test_clear_errors(tmp_path: Path, tiny_checkpoint: Path, capsys, setup: str, message: str):
    checkpoint, out = tmp_path / "checkpoint.pt", tmp_path / "out"
    if setup == "garbage":
        checkpoint.write_bytes(b"not a checkpoint")
    if setup == "not_a_bundle":
        checkpoint = tiny_checkpoint
        out.mkdir()
        (out / "notes.txt").write_text("precious")
    assert main(["--checkpoint", str(checkpoint), "--out", str(out), "--force"]) == 1
    assert message in capsys.readouterr().err
    if setup == "not_a_bundle":
        assert (out / "notes.txt").read_text() == "precious"


def test_too_few_parity_sentences(tmp_path: Path, tiny_checkpoint: Path, capsys):
    few = tmp_path / "few.en"
    few.write_text("A dog.\nA cat.\n")
    assert main(["--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path / "b"), "--parity-data", str(few)]) == 1
    assert "at least 50 sentences" in capsys.readouterr().err
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == '["few.en"]'


def test_help_documents_every_option():
    assert_documents_every_option(build_parser(), run_help("export"))
