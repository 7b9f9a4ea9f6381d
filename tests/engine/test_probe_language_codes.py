"""Language names a request may send that name no language: a blank one, and a tag whose language
subtag is empty ("-de"), which named the first language served that has no model code."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.bundle import Language
from engine.languages import UnsupportedLanguage, broader, find
from engine.repository import Router, discover
from tests.conftest import relabelled_bundle

SERVED = [Language(code="fr"), Language(code="de"), Language(code="en", model_code="eng_Latn")]


@pytest.mark.parametrize("name", ["-de", "-fr", "_DE", "-", " ", "  -en-US"])
def test_a_name_without_a_language_subtag_names_no_language(name: str) -> None:
    assert find(SERVED, name) is None
    assert "" not in broader(name)


@pytest.mark.parametrize(("name", "code"), [("de-DE", "de"), (" DE ", "de"), ("eng_latn", "en"), ("en-US", "en")])
def test_names_of_a_language_still_find_it(name: str, code: str) -> None:
    found = find(SERVED, name)
    assert found is not None and found.code == code


def test_the_router_refuses_a_region_without_a_language(tiny_bundle: Path, tmp_path: Path) -> None:
    """Before, "-de" as the source routed German text through the fr->en model."""
    relabelled_bundle(tiny_bundle, tmp_path / "fr-en", "tiny-fr-en", ["fr"], ["en"])
    relabelled_bundle(tiny_bundle, tmp_path / "de-en", "tiny-de-en", ["de"], ["en"])
    router = Router(discover(tmp_path))
    for name in ("-de", " "):
        with pytest.raises(UnsupportedLanguage, match="unsupported source language"):
            router.route(name, "en")
    with pytest.raises(UnsupportedLanguage, match="unsupported target language"):
        router.route("de", "-en")
