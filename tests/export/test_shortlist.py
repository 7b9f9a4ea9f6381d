"""The vocabulary shortlist's builder (export/shortlist.py) and its use by the engine."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from engine import TranslationOptions, Translator, TranslatorConfig
from engine.bundle import MANIFEST, load_bundle
from engine.runner import decoder_graph
from engine.shortlist import Shortlist
from export.shortlist import Trial, build, choose, write

EOS = 3
# Source piece 5 goes with target piece 10, 6 with 11, 7 with 12; 20 and 21 are everywhere.
SOURCES = [[5, 6, EOS], [5, 7, EOS], [6, 7, EOS], [5, EOS]]
TARGETS = [[20, 10, 11, 21, EOS], [20, 10, 12, EOS], [11, 20, 12, EOS], [10, 21, EOS]]


def test_each_source_piece_ranks_its_translation_first() -> None:
    shortlist = build(SOURCES, TARGETS, source_vocab=30, target_vocab=30, k=3, frequent=2)
    assert [shortlist.table[s, 0] for s in (5, 6, 7)] == [10, 11, 12]
    assert shortlist.table[8].tolist() == [-1, -1, -1]  # never seen: nothing
    assert shortlist.frequent.tolist() == [EOS, 10]  # EOS 4 times, then 10 and 20 3 times: the lower id first
    assert set(shortlist.for_batch([[5, 6, EOS]], [29]).tolist()) >= {10, 11, 20, EOS, 29}


def test_the_file_loads_as_written(tmp_path: Path) -> None:
    shortlist = build(SOURCES, TARGETS, source_vocab=30, target_vocab=30, k=2, frequent=3)
    shortlist.save(tmp_path / "shortlist.npz")
    loaded = Shortlist.load(tmp_path / "shortlist.npz")
    np.testing.assert_array_equal(loaded.table, shortlist.table)
    np.testing.assert_array_equal(loaded.frequent, shortlist.frequent)
    assert loaded.cut(1, 2).table.shape == (30, 1) and len(loaded.cut(1, 2).frequent) == 2
    # held in the file's type (int16 for ids below 2**15), not widened; a batch's ids come out int64
    assert loaded.table.dtype == loaded.frequent.dtype == np.int16
    batch = loaded.for_batch([[5, 6]], [29])
    assert batch.dtype == np.int64 and batch.tolist() == shortlist.for_batch([[5, 6]], [29]).tolist()


def test_the_choice_is_the_smallest_within_tolerance() -> None:
    trials = [Trial(10, 100, 39.0, 500), Trial(30, 100, 39.3, 1300), Trial(60, 100, 39.4, 2400)]
    assert choose(39.45, trials, 0.2) == trials[1]
    assert choose(40.0, trials, 0.2) is None


@pytest.fixture(scope="module")
def shortlisted_bundle(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shortlisted") / "bundle"
    shutil.copytree(tiny_bundle, out)
    shortlist = build(SOURCES, TARGETS, source_vocab=150, target_vocab=150, k=2, frequent=5)
    write(out, shortlist, default=True, bleu={"val": {"full": 1.0, "shortlist": 1.0}})
    return out


def test_the_bundle_names_its_shortlist(shortlisted_bundle: Path) -> None:
    entry = load_bundle(shortlisted_bundle).manifest.shortlist
    assert entry is not None and (entry.file, entry.k, entry.frequent, entry.default) == ("shortlist.npz", 2, 5, True)


def test_a_shortlist_with_the_translations_pieces_translates_as_the_full_vocabulary(
    shortlisted_bundle: Path, tiny_corpus: Path
) -> None:
    texts = (tiny_corpus / "val.en").read_text().splitlines()[:12]
    translator = Translator(TranslatorConfig(model_dir=shortlisted_bundle, provider="cpu", threads=1))
    greedy = dict(beam_size=1)  # renormalised over fewer pieces, beams may rank otherwise; the best piece stays
    full = [r.text for r in translator.translate_batch(texts, TranslationOptions(shortlist=False, **greedy)).results]
    pieces = {p for text in full for p in translator.tokenizer.encode_target(text)}
    translator.shortlist = Shortlist(np.full((150, 1), -1), np.array(sorted(pieces)))
    short = translator.translate_batch(texts, TranslationOptions(**greedy)).results  # on by default here
    assert [r.text for r in short] == full
    assert len(pieces) < 150  # it did leave pieces out


@pytest.fixture(scope="module")
def external_shortlisted_bundle(shortlisted_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shortlisted bundle with its decoders' weights in files of their own, as imported
    models have them."""
    out = tmp_path_factory.mktemp("external") / "bundle"
    shutil.copytree(shortlisted_bundle, out)
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    for graph in out.glob("decoder*.onnx"):
        data = f"{graph.name}.data"
        onnx.save(onnx.load(str(graph)), str(graph), save_as_external_data=True, location=data)
        for name in (graph.name, data):
            manifest["files"][name] = hashlib.sha256((out / name).read_bytes()).hexdigest()
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return out


@pytest.mark.parametrize("shared", [False, True])
def test_external_weights_stay_external_through_the_edit(
    external_shortlisted_bundle: Path,
    shortlisted_bundle: Path,
    tiny_corpus: Path,
    tmp_path: Path,
    shared: bool,
) -> None:
    """The decoder edited to take the shortlist refers to the weight files rather than holding the
    weights; loaded from its bytes, or through the shared-weights cache, it translates as the same
    graph with embedded weights."""
    edited = decoder_graph(external_shortlisted_bundle / "decoder.onnx", shortlist=True)
    assert edited is not None
    assert len(edited) < 0.2 * sum(p.stat().st_size for p in external_shortlisted_bundle.glob("decoder.onnx*"))
    texts = (tiny_corpus / "val.en").read_text().splitlines()[:8]
    results = []
    for bundle in (external_shortlisted_bundle, shortlisted_bundle):
        config = TranslatorConfig(
            model_dir=bundle, provider="cpu", threads=1, weights_cache=tmp_path if shared else None
        )
        translator = Translator(config)
        for shortlist in (False, True):
            results.append(
                [r.text for r in translator.translate_batch(texts, TranslationOptions(shortlist=shortlist)).results]
            )
    assert results[:2] == results[2:]
