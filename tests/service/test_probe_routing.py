"""Probes of identification and language names against a real server of several models
(``model_repository``: en->de, de->en, fr->en, cs/sk->en/pl): a short text in a script the
identifier's set does not write, and a language tag without a language subtag."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_server import StartService, assert_error, assert_libretranslate_error

ARABIC = "مرحبا بالعالم"  # "hello world": Arabic 0.58, Persian 0.26, the set's languages 0.0004 together
ENGLISH = "A dog runs in the park."


@pytest.fixture(scope="module")
def client(start_service: StartService, model_repository: Path) -> Iterator[httpx.Client]:
    server = start_service(model_dir="", models_dir=model_repository)
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def test_a_short_arabic_text_fails_only_itself_as_arabic(client: httpx.Client) -> None:
    """Before, it was "translated" by the en->de model, answered as English at 0.0002."""
    body = client.post("/v1/translate", json={"text": [ARABIC, ENGLISH], "target_lang": "de"}).json()
    arabic, english = body["translations"]
    assert arabic["text"] == ARABIC and "model" not in arabic
    assert arabic["error"]["type"] == "unsupported_language" and arabic["error"]["detected_language"] == "ar"
    assert english["model"] == "tiny-en-de:1.0.0"
    assert client.post("/v1/detect", json={"text": ARABIC}).json()["language"] == "ar"


@pytest.mark.parametrize("name", ["-de", "-fr", " "])
def test_a_tag_without_a_language_is_refused_on_every_api(client: httpx.Client, name: str) -> None:
    """Before, "-de" named the first language served without a model code: German text went through
    the fr->en model, a 200."""
    v1 = client.post("/v1/translate", json={"text": "Ein Hund.", "source_lang": name, "target_lang": "en"})
    assert_error(v1, 400, "unsupported_language")
    v1_target = client.post("/v1/translate", json={"text": ENGLISH, "source_lang": "en", "target_lang": name})
    assert_error(v1_target, 400, "unsupported_language")
    libre = client.post("/translate", json={"q": "Ein Hund.", "source": name, "target": "en"})
    assert_libretranslate_error(libre, 400)
    deepl = client.post("/v2/translate", json={"text": ["Ein Hund."], "source_lang": name, "target_lang": "EN-US"})
    assert deepl.status_code == 400
