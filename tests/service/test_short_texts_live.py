"""Short texts with the source language omitted, on a real server of the shipped models (en->de,
de->en), through the service's API, LibreTranslate's ``source: "auto"`` and DeepL's omitted
``source_lang`` alike: translated from their own language (a guess said to be one), never refused;
what the identifier knows nothing of is undetermined; a French paragraph is still refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_server import API_KEYS, assert_error, assert_libretranslate_error

from service.launcher import LiveService

MODELS = Path(__file__).resolve().parents[2] / "models"
# The first texts a person types, each refused or kept unchanged before: "Hello." and "Hi!" refused as
# Italian; the German ones identified as English and returned as they were, into English.
SHORT = {
    "en": ["Hello.", "Hi!", "Yes", "Welcome", "Cat", "Good morning"],
    "de": ["Hallo", "Hallo.", "Ja", "Anmelden", "Abbrechen", "Suche", "Senden", "Zur Kasse", "Prost!"],
}
OTHER = {"en": "de", "de": "en"}
MODEL = {"en": "mt-en-de:", "de": "mt-de-en:"}  # name:version
FRENCH = (
    "Le chien dort sous l'arbre du jardin. Ce matin, nous sommes allés au marché acheter du pain, "
    "des fromages et des fruits pour le déjeuner de dimanche."
)
CASES = [(language, text) for language, texts in SHORT.items() for text in texts]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    settings = {"MT_MODELS_DIR": str(MODELS), "MT_THREADS": "1", "MT_LOG_LEVEL": "warning"}
    settings["MT_API_KEYS"] = ",".join(API_KEYS)
    with LiveService(settings, tmp_path_factory.mktemp("short") / "service.log") as live:
        yield live


@pytest.fixture(scope="module")
def client(service: LiveService) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {API_KEYS[0]}"}
    with httpx.Client(base_url=service.url, headers=headers, timeout=60) as client:
        yield client


@pytest.mark.parametrize(("language", "text"), CASES)
def test_v1_translates_a_short_text_from_its_own_language(client: httpx.Client, language: str, text: str) -> None:
    response = client.post("/v1/translate", json={"text": text, "target_lang": OTHER[language]})
    assert response.status_code == 200, response.text
    [translation] = response.json()["translations"]
    assert translation["model"].startswith(MODEL[language]) and "error" not in translation
    detected = translation["detected_language"]
    assert detected["language"] == language
    assert detected.get("guessed") in (None, True) and (detected.get("guessed") or detected["confidence"] >= 0.9)


@pytest.mark.parametrize(("language", "text"), CASES)
def test_libretranslate_auto_translates_a_short_text_from_its_own_language(
    client: httpx.Client, language: str, text: str
) -> None:
    body = {"q": text, "source": "auto", "target": OTHER[language], "api_key": API_KEYS[0]}
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["detectedLanguage"]["language"] == language
    assert response.json()["translatedText"] == v1_text(client, text, language)


@pytest.mark.parametrize(("language", "text"), CASES)
def test_deepl_without_source_lang_translates_a_short_text_from_its_own_language(
    client: httpx.Client, language: str, text: str
) -> None:
    headers = {"Authorization": f"DeepL-Auth-Key {API_KEYS[0]}"}
    response = client.post("/v2/translate", json={"text": [text], "target_lang": OTHER[language]}, headers=headers)
    assert response.status_code == 200, response.text
    [translation] = response.json()["translations"]
    assert translation["detected_source_language"] == language.upper()
    assert translation["text"] == v1_text(client, text, language)


def v1_text(client: httpx.Client, text: str, language: str) -> str:
    """The translation with the source named: what an identified text must come back as."""
    body = {"text": text, "source_lang": language, "target_lang": OTHER[language]}
    response = client.post("/v1/translate", json=body)
    assert response.status_code == 200, response.text
    return response.json()["translations"][0]["text"]


def test_a_guess_says_so_with_its_low_confidence(client: httpx.Client) -> None:
    response = client.post("/v1/translate", json={"text": "Hallo", "target_lang": "en"})
    detected = response.json()["translations"][0]["detected_language"]
    assert detected["language"] == "de" and detected["guessed"] is True and detected["confidence"] < 0.5


@pytest.mark.parametrize("text", ["Yes", "Welcome", "Hallo", "Cat"])
def test_what_the_identifier_knows_nothing_of_is_undetermined(client: httpx.Client, text: str) -> None:
    """Before, each got the same candidates (en 0.1245, de 0.0803, fr 0.0534), named as if known."""
    response = client.post("/v1/detect", json={"text": text})
    assert response.status_code == 200, response.text
    assert response.json() == {"language": None, "confidence": 0.0, "candidates": []}
    libre = client.post("/detect", json={"q": text, "api_key": API_KEYS[0]})
    assert libre.status_code == 200 and libre.json() == [{"language": None, "confidence": 0.0}]


@pytest.mark.parametrize(("text", "language"), [("Abbrechen", "de"), ("Hello.", "en"), ("Hi!", "en")])
def test_detect_answers_a_short_text_as_translate_takes_it(client: httpx.Client, text: str, language: str) -> None:
    """A LibreTranslate client detects, then translates from what /detect said: "Abbrechen" was English
    (0.37), "Hello." Italian."""
    found = client.post("/v1/detect", json={"text": text}).json()
    assert found["language"] == language and found["candidates"][0]["language"] == language
    libre = client.post("/detect", json={"q": text, "api_key": API_KEYS[0]}).json()
    assert libre[0]["language"] == language


def test_a_french_paragraph_is_still_refused_on_every_api(client: httpx.Client) -> None:
    error = assert_error(
        client.post("/v1/translate", json={"text": FRENCH, "target_lang": "en"}), 400, "unsupported_language"
    )
    assert error["detected_language"] == "fr"
    body = {"q": FRENCH, "source": "auto", "target": "de", "api_key": API_KEYS[0]}
    assert_libretranslate_error(client.post("/translate", json=body), 400, "fr is not supported")
    headers = {"Authorization": f"DeepL-Auth-Key {API_KEYS[0]}"}
    deepl = client.post("/v2/translate", json={"text": [FRENCH], "target_lang": "EN"}, headers=headers)
    assert deepl.status_code == 400 and "'fr'" in deepl.json()["message"]
