"""What each API says of a text's language, against a real server: /v1/detect names the language
/v1/translate refuses a text as, LibreTranslate's /detect answers among its languages as
LibreTranslate does, DeepL's API answers a text into its own language and names a language for
every text as DeepL does, and a regional tag (en-US, zh-Hans) names the language a model serves
without turning Traditional Chinese into Simplified. Glossary terms the translator copies instead
of translating (emoji, addresses) are refused when the glossary is made."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import API_KEYS, ServiceProcess, StartService, assert_error

from tests.conftest import both_ways, relabelled_bundle

CHINESE = "我今天很高兴见到你。"
ENGLISH = "A dog runs in the park."
GERMAN = "Ein Hund läuft im Park."


@pytest.fixture(scope="module")
def served(start_service: StartService, tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> ServiceProcess:
    """en->de, de->en and en->zh (a bare "zh": Simplified Chinese), with API keys."""
    root = tmp_path_factory.mktemp("consistency_repository")
    both_ways(tiny_bundle, root)
    relabelled_bundle(tiny_bundle, root / "en-zh", "tiny-en-zh", ["en"], ["zh"])
    return start_service(model_dir="", models_dir=root, api_keys=",".join(API_KEYS), max_wait_ms=2)


@pytest.fixture(scope="module")
def client(served: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {API_KEYS[0]}"}, timeout=60) as c:
        yield c


def v1(client: httpx.Client, text: str | list[str], source: str, target: str) -> httpx.Response:
    return client.post("/v1/translate", json={"text": text, "source_lang": source, "target_lang": target})


def deepl(client: httpx.Client, text: list[str], target: str, source: str | None = None) -> list[dict[str, Any]]:
    body = {"text": text, "target_lang": target, **({"source_lang": source} if source else {})}
    response = client.post("/v2/translate", json=body)
    assert response.status_code == 200, response.text
    return response.json()["translations"]


# -- /v1/detect and /detect ---------------------------------------------------------------------


def test_v1_detect_names_the_language_v1_translate_refuses_a_text_as(client: httpx.Client) -> None:
    refused = assert_error(v1(client, CHINESE, "auto", "de"), 400, "unsupported_language")
    detected = client.post("/v1/detect", json={"text": CHINESE}).json()
    assert detected["language"] == refused["detected_language"] == "zh"
    assert detected["confidence"] >= 0.9
    assert detected["candidates"][0] == {"language": "zh", "confidence": detected["confidence"]}


def test_v1_detect_of_a_language_of_the_set_is_unchanged(client: httpx.Client) -> None:
    detected = client.post("/v1/detect", json={"text": "Le chien dort sous l'arbre dans le jardin."}).json()
    assert detected["language"] == detected["candidates"][0]["language"] == "fr"


def test_libretranslate_detect_answers_among_its_languages_only(client: httpx.Client) -> None:
    """LibreTranslate's detector keeps only the languages it has installed; its clients send the
    answer back as a source language."""
    answer = client.post("/detect", data={"q": CHINESE}).json()
    assert answer and "zh" not in {candidate["language"] for candidate in answer}


# -- DeepL: a text into its own language, and the language of every text ------------------------


@pytest.mark.parametrize(("source", "target"), [("EN", "EN-US"), ("en", "en-gb"), ("EN", "EN"), ("DE", "DE")])
def test_deepl_returns_a_text_into_its_own_language_as_it_is(client: httpx.Client, source: str, target: str) -> None:
    translations = deepl(client, [ENGLISH, "42"], target, source)
    assert translations == [
        {"detected_source_language": source.upper(), "text": ENGLISH},
        {"detected_source_language": source.upper(), "text": "42"},
    ]


def test_v1_still_refuses_a_stated_source_that_is_the_target(client: httpx.Client) -> None:
    assert_error(v1(client, ENGLISH, "en", "en"), 400, "unsupported_language")


@pytest.mark.parametrize(("target", "language"), [("DE", "EN"), ("EN-US", "DE")])
def test_deepl_names_a_language_for_a_text_with_nothing_to_identify(
    client: httpx.Client, target: str, language: str
) -> None:
    """Alone, the language translated into the target from (the only one here); beside a text that
    was identified, that text's language."""
    assert [t["detected_source_language"] for t in deepl(client, ["42"], target)] == [language]
    assert [t["detected_source_language"] for t in deepl(client, [""], target)] == [language]
    identified = GERMAN if target == "EN-US" else ENGLISH
    assert [t["detected_source_language"] for t in deepl(client, ["42", identified, "😀"], target)] == [language] * 3


# -- regional tags -------------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "target", "language"), [("en-US", "de-DE", "de"), ("en-GB", "zh-Hans", "zh")])
def test_v1_serves_a_regional_tag_by_the_model_of_its_language(
    client: httpx.Client, source: str, target: str, language: str
) -> None:
    regional = v1(client, ENGLISH, source, target)
    assert regional.status_code == 200, regional.text
    assert regional.json() == v1(client, ENGLISH, "en", language).json()


@pytest.mark.parametrize("target", ["zh-Hant", "zh-TW", "zh-Hant-HK"])
def test_traditional_chinese_is_not_served_by_a_simplified_model(client: httpx.Client, target: str) -> None:
    assert_error(v1(client, ENGLISH, "en", target), 400, "unsupported_language")
    assert client.post("/v2/translate", json={"text": [ENGLISH], "target_lang": "ZH-HANT"}).status_code == 400


def test_deepl_zh_hans_is_served_by_the_chinese_model(client: httpx.Client) -> None:
    [translation] = deepl(client, [ENGLISH], "ZH-HANS", "EN")
    assert translation["text"] == v1(client, ENGLISH, "en", "zh").json()["translations"][0]["text"]


# -- glossary terms kept as written --------------------------------------------------------------


@pytest.mark.parametrize("source", ["😀", "https://example.org/dogs", "Brand™"])
def test_a_glossary_term_the_model_never_reads_is_refused(client: httpx.Client, source: str) -> None:
    entries = [{"source": "dog", "target": "Hund"}, {"source": source, "target": "Smiley"}]
    stored = {"name": "x", "source_lang": "en", "target_lang": "de", "entries": entries}
    error = assert_error(client.post("/v1/glossaries", json=stored), 422, "invalid_glossary")
    assert "term 1" in error["message"] and source in error["message"]
    inline = {"text": ENGLISH, "source_lang": "en", "target_lang": "de", "glossary": {"entries": entries}}
    assert_error(client.post("/v1/translate", json=inline), 422, "invalid_glossary")
    made = {
        "name": "x",
        "source_lang": "EN",
        "target_lang": "DE",
        "entries": f"{source}\tSmiley",
        "entries_format": "tsv",
    }
    refused = client.post("/v2/glossaries", json=made)
    assert refused.status_code == 400 and source in refused.json()["message"], refused.text
