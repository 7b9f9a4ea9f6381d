"""The model repository: discovering bundles, and routing a pair directly or through a pivot."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.bundle import BundleError
from engine.languages import UnsupportedLanguage
from engine.repository import Hop, Route, Router, discover, single
from tests.conftest import relabelled_bundle


def test_every_bundle_below_the_directory_is_found_by_its_name(model_repository: Path) -> None:
    entries = {e.id: e for e in discover(model_repository)}
    assert set(entries) == {"tiny-en-de", "tiny-de-en", "tiny-fr-en", "tiny-many", "tiny-broken"}
    assert entries["tiny-many"].path == model_repository / "many" / "bundle"
    assert entries["tiny-many"].pairs == [("cs", "en"), ("cs", "pl"), ("sk", "en"), ("sk", "pl")]
    assert all(e.error is None for e in entries.values())  # a corrupted graph shows only when it loads


def test_unreadable_and_duplicate_bundles_are_entries_with_errors(model_repository: Path, tmp_path: Path) -> None:
    root = tmp_path / "models"
    shutil.copytree(model_repository / "en-de", root / "a")
    shutil.copytree(model_repository / "en-de", root / "b")  # the same name again
    (root / "c").mkdir()
    (root / "c" / "manifest.json").write_text("{not json")
    entries = {e.id: e for e in discover(root)}
    assert set(entries) == {"tiny-en-de", "b", "c"}
    assert entries["tiny-en-de"].manifest is not None and entries["tiny-en-de"].path == root / "a"
    assert "already served from" in (entries["b"].error or "")
    assert "not valid JSON" in (entries["c"].error or "")
    assert Router(entries.values()).pairs() == [("en", "de")]


def test_a_missing_repository_is_an_error_and_one_bundle_is_a_repository(model_repository: Path) -> None:
    with pytest.raises(BundleError, match="does not exist"):
        discover(model_repository / "nowhere")
    assert [e.id for e in single(model_repository / "de-en")] == ["tiny-de-en"]
    assert [e.id for e in discover(model_repository / "de-en")] == ["tiny-de-en"]


def test_a_direct_model_wins_and_a_pivot_chains_two(model_repository: Path) -> None:
    router = Router(discover(model_repository))
    assert router.route("en", "de") == Route((Hop("tiny-en-de", "en", "de"),))
    fr_de = router.route("FR", "de")
    assert fr_de.hops == (Hop("tiny-fr-en", "fr", "en"), Hop("tiny-en-de", "en", "de"))
    assert fr_de.pivot == "en" and (fr_de.source, fr_de.target) == ("fr", "de")
    assert router.route("cs", "de").hops == (Hop("tiny-many", "cs", "en"), Hop("tiny-en-de", "en", "de"))
    assert ("fr", "de") in router.pairs() and ("sk", "de") in router.pairs()
    assert ("de", "pl") not in router.pairs()  # nothing translates en->pl
    assert ("de", "de") not in router.pairs()


def test_without_pivoting_only_direct_pairs_are_served(model_repository: Path) -> None:
    router = Router(discover(model_repository), pivot=False)
    with pytest.raises(UnsupportedLanguage, match=r"no model translates 'fr' into 'de'; served pairs: .*fr->en"):
        router.route("fr", "de")
    assert ("fr", "de") not in router.pairs()


def test_the_most_specific_model_serves_a_pair_several_serve(model_repository: Path, tmp_path: Path) -> None:
    many = relabelled_bundle(model_repository / "en-de", tmp_path / "wide", "wide", ["en", "cs"], ["de", "pl"])
    router = Router([*discover(model_repository), *discover(many)])
    assert router.route("en", "de").hops[0].model == "tiny-en-de"
    assert router.route("en", "pl").hops[0].model == "wide"


def test_unknown_languages_are_named(model_repository: Path) -> None:
    router = Router(discover(model_repository))
    with pytest.raises(UnsupportedLanguage, match="unsupported source language 'xx'"):
        router.route("xx", "de")
    with pytest.raises(UnsupportedLanguage, match="unsupported target language 'fr'"):
        router.route("en", "fr")
    with pytest.raises(UnsupportedLanguage, match="both 'en'"):
        router.route("en", "EN")
