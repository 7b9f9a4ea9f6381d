"""Which language a request's name means across the models of a repository (``Router.code``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.languages import UnsupportedLanguage
from engine.repository import Hop, Router, discover
from tests.conftest import relabelled_bundle


@pytest.fixture(scope="module")
def chinese_repository(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bilingual zh-Hant->en model, preferred where it serves a pair, beside a many-to-many model
    that has "zh" itself, and two bilingual models of Portuguese variants."""
    root = tmp_path_factory.mktemp("chinese_repository")
    relabelled_bundle(tiny_bundle, root / "hant", "tiny-zh-hant-en", ["zh-Hant"], ["en"])
    relabelled_bundle(tiny_bundle, root / "many", "tiny-many", ["zh", "de"], ["en", "fr"])
    relabelled_bundle(tiny_bundle, root / "pt-br", "tiny-pt-br-en", ["pt-BR"], ["en"])
    relabelled_bundle(tiny_bundle, root / "pt-pt", "tiny-pt-pt-en", ["pt-PT"], ["en"])
    return root


def test_a_code_one_model_has_wins_over_a_subtag_of_another_models_code(chinese_repository: Path) -> None:
    router = Router(discover(chinese_repository))
    # "zh" is the many-to-many model's own code; before, the bilingual model, looked at first, took it
    # for the one code of its own that starts with it: Simplified Chinese went to the Traditional model.
    assert router.route("zh", "en").hops == (Hop("tiny-many", "zh", "en"),)
    assert router.route("ZH-hant", "en").hops == (Hop("tiny-zh-hant-en", "zh-Hant", "en"),)


def test_a_subtag_that_two_models_codes_start_names_neither(chinese_repository: Path) -> None:
    router = Router(discover(chinese_repository))
    with pytest.raises(UnsupportedLanguage, match=r"unsupported source language 'pt'.*pt-BR, pt-PT"):
        router.route("pt", "en")
    assert router.route("pt-pt", "en").hops == (Hop("tiny-pt-pt-en", "pt-PT", "en"),)


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("zh-TW", "zh-Hant"),  # Taiwan writes Traditional Chinese: the region implies the script
        ("zh-Hant-HK", "zh-Hant"),
        ("zh-Hans", "zh"),  # a bare "zh" is Simplified Chinese
        ("zh-CN", "zh"),
        ("de-DE", "de"),
        ("DE-at", "de"),
        ("pt-BR", "pt-BR"),
    ],
)
def test_a_regional_tag_names_its_language_where_no_model_has_the_tag(
    chinese_repository: Path, name: str, code: str
) -> None:
    assert Router(discover(chinese_repository)).code(name, "source") == code


@pytest.mark.parametrize("name", ["zh-Hant", "zh-TW", "zh-Hant-TW", "zh-HK"])
def test_traditional_chinese_never_falls_back_to_a_bare_zh_model(chinese_repository: Path, name: str) -> None:
    """Only the many-to-many model, whose "zh" is Simplified: Traditional Chinese is not served."""
    with pytest.raises(UnsupportedLanguage):
        Router(discover(chinese_repository / "many")).code(name, "source")


@pytest.mark.parametrize("name", ["pt-AO", "de-Latn", "de-1996", "en-US"])
def test_a_tag_whose_broader_language_is_not_one_served_is_refused(chinese_repository: Path, name: str) -> None:
    # pt is served only as pt-BR and pt-PT (no sibling region is guessed); a script subtag with no
    # known default keeps its language; a variant alone is no region; no model translates from en.
    with pytest.raises(UnsupportedLanguage):
        Router(discover(chinese_repository)).code(name, "source")
