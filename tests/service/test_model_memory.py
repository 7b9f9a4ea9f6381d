"""A model's memory figure (``/v1/models``' ``memory_mb``, ``mt_model_memory_bytes``, what
``MT_MAX_LOADED_MB`` is judged by) is what the model holds: two models of one size get the same
figure whichever loads first. The first used to be charged the engine processes' own start (their
interpreter and imports, still under way when its load was measured) and onnxruntime's
once-per-process costs: 176.5 MB against 13.7 MB for the two shipped models."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import onnx
import pytest
from live_server import StartService, metric, scrape

from tests.conftest import relabelled_bundle


def distinct_copy(bundle: Path, out: Path, name: str, sources: list[str], targets: list[str]) -> Path:
    """A relabelled copy of ``bundle`` whose graphs are files of their own: the same weights, but
    other bytes (a doc string naming the copy), so that no cache or mapping is shared with another
    copy, as between two models of one size."""
    copy = relabelled_bundle(bundle, out, name, sources, targets)
    manifest = json.loads((copy / "manifest.json").read_text())
    for file in sorted(f for f in manifest["files"] if f.endswith(".onnx")):
        graph = onnx.load_model(str(copy / file))
        graph.doc_string = f"{name}: {file}"
        onnx.save_model(graph, str(copy / file))
        manifest["files"][file] = hashlib.sha256((copy / file).read_bytes()).hexdigest()
    (copy / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return copy


@pytest.fixture(scope="module")
def two_of_a_size(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("two_of_a_size")
    distinct_copy(tiny_bundle, root / "en-de", "tiny-en-de", ["en"], ["de"])
    distinct_copy(tiny_bundle, root / "de-en", "tiny-de-en", ["de"], ["en"])
    return root


@pytest.mark.parametrize("engine_process", [1, 0], ids=["engine processes", "in process"])
@pytest.mark.parametrize("first", ["tiny-de-en", "tiny-en-de"])
def test_two_models_of_one_size_hold_the_same_memory_whichever_loads_first(
    start_service: StartService, two_of_a_size: Path, first: str, engine_process: int
) -> None:
    second = ({"tiny-de-en", "tiny-en-de"} - {first}).pop()
    settings = {"model_dir": "", "models_dir": two_of_a_size, "preload": "none", "streams": 2}
    server = start_service(**settings, engine_process=engine_process)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for model in (first, second):  # loaded on first use, one after the other
            source, target = model.removeprefix("tiny-").split("-")
            body = {"text": "A dog runs.", "source_lang": source, "target_lang": target}
            assert client.post("/v1/translate", json=body).status_code == 200
        models = {m["id"]: m for m in client.get("/v1/models").json()["models"]}
        samples = scrape(client)
    figures = {model: models[model]["memory_mb"] for model in (first, second)}
    assert all(figure > 0 for figure in figures.values()), figures
    # Before, the first was charged 60-80 MB more than the second in engine processes, 19 MB more in
    # process (the tiny model holds about 5 MB). What is left to the first: the pages of
    # onnxruntime's kernels that its graphs are the first to run, about 1 MB a process.
    assert abs(figures[first] - figures[second]) < 4, figures
    for model, figure in figures.items():
        assert metric(samples, "mt_model_memory_bytes", model=model) / 1e6 == pytest.approx(figure, abs=0.05)
