"""Bundle loading and validation: a good bundle loads; each kind of damage gives a BundleError that
names the file and the problem."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from repo_root import REPO, python_env

from engine.bundle import BundleError, load_bundle, sha256_file


@pytest.fixture
def bundle_copy(tmp_path: Path, tiny_bundle: Path) -> Path:
    return Path(shutil.copytree(tiny_bundle, tmp_path / "bundle"))


def edit_manifest(bundle: Path, edit: Callable[[dict], None]) -> None:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def edit_graph(bundle: Path, name: str, edit: Callable[[onnx.ModelProto], None]) -> None:
    """Change a graph and record its new checksum, so that only the graph check can object."""
    graph = onnx.load(bundle / name)
    edit(graph)
    onnx.save(graph, bundle / name)
    edit_manifest(bundle, lambda m: m["files"].update({name: sha256_file(bundle / name)}))


def test_valid_bundle_loads(tiny_bundle: Path):
    bundle = load_bundle(tiny_bundle)
    m = bundle.manifest
    assert m.schema_version == 3 and set(m.variants) == {"fp32", "int8"}
    assert (bundle.path / m.tokenizer.source.model).is_file()
    assert all(p.is_file() for p in bundle.graph_paths("int8"))
    assert m.dimensions.heads * m.dimensions.d_head == m.dimensions.d_model


def test_loading_needs_neither_torch_nor_onnx(tiny_bundle: Path):
    code = f"import sys, engine.bundle as b; b.load_bundle({str(tiny_bundle)!r}); print(sorted(set(sys.modules)))"
    env = python_env()
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "'torch'" not in out and "'onnx'" not in out


def rename_input(graph: onnx.ModelProto) -> None:
    old = graph.graph.input[0].name
    graph.graph.input[0].name = "source_ids"
    for node in graph.graph.node:
        node.input[:] = ["source_ids" if name == old else name for name in node.input]


def fix_batch_axis(graph: onnx.ModelProto) -> None:
    graph.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: (b / "decoder.int8.onnx").unlink(), "decoder.int8.onnx: missing"),
        (lambda b: (b / "encoder.onnx.data").unlink(), "encoder.onnx.data: missing"),
        (lambda b: (b / "decoder.onnx.data").write_bytes(b"tampered"), "decoder.onnx.data: sha256 mismatch"),
        (lambda b: (b / "manifest.json").unlink(), "manifest.json: missing"),
        (lambda b: (b / "spm.model").write_bytes(b"tampered"), "spm.model: sha256 mismatch"),
        (lambda b: edit_manifest(b, lambda m: m.update(schema_version=4)), "unknown schema_version 4"),
        (lambda b: edit_manifest(b, lambda m: m.update(schema_version=1)), "re-export"),
        (lambda b: edit_manifest(b, lambda m: m.pop("dimensions")), "invalid manifest: dimensions: Field required"),
        (lambda b: edit_manifest(b, lambda m: m.update(colour="red")), "colour: Extra inputs are not permitted"),
        (lambda b: edit_manifest(b, lambda m: m["files"].pop("encoder.onnx")), "['encoder.onnx'] are used but have no"),
        (
            lambda b: edit_manifest(b, lambda m: m["default_variant"].update(cpu="fp16")),
            "default_variant.cpu is 'fp16'",
        ),
        (lambda b: edit_manifest(b, lambda m: m["files"].update({"../x": "0"})), "points outside the bundle"),
        (lambda b: (b / "manifest.json").write_text("{not json"), "not valid JSON"),
        (lambda b: edit_graph(b, "encoder.onnx", rename_input), "encoder.onnx: inputs are ['source_ids'], expected"),
        (
            lambda b: edit_graph(b, "encoder.onnx", fix_batch_axis),
            "'src_ids' axis 0 (B) is fixed at 1, must be dynamic",
        ),
        (lambda b: shutil.copy(b / "encoder.onnx", b / "decoder.onnx"), "decoder.onnx: sha256 mismatch"),
        (lambda b: edit_manifest(b, lambda m: m["dimensions"].update(vocab_size=7)), "log_probs' axis 1 (V) is 150"),
        (
            lambda b: edit_manifest(
                b, lambda m: m["dimensions"].update(decoder_layers=m["dimensions"]["decoder_layers"] + 1)
            ),
            "encoder.onnx: outputs are ['cross_k_0'",
        ),
    ],
)
def test_damage_is_named(bundle_copy: Path, damage: Callable[[Path], None], message: str):
    damage(bundle_copy)
    with pytest.raises(BundleError) as error:
        load_bundle(bundle_copy)
    assert message in str(error.value)


def test_wrong_graph_in_place_of_the_decoder(bundle_copy: Path):
    """An encoder graph where the decoder should be, checksum recorded: the signature check catches it."""
    shutil.copy(bundle_copy / "encoder.onnx", bundle_copy / "decoder.onnx")
    edit_manifest(bundle_copy, lambda m: m["files"].update({"decoder.onnx": sha256_file(bundle_copy / "decoder.onnx")}))
    with pytest.raises(BundleError, match=r"decoder.onnx: inputs are \['src_ids'\], expected \['tokens'"):
        load_bundle(bundle_copy)


def test_unknown_variant_and_missing_directory(tiny_bundle: Path, tmp_path: Path):
    with pytest.raises(BundleError, match=r"no variant 'fp16' \(available: \['fp32', 'int8'\]\)"):
        load_bundle(tiny_bundle, check_graphs=False).graph_paths("fp16")
    with pytest.raises(BundleError, match="bundle directory does not exist"):
        load_bundle(tmp_path / "nowhere")
