"""Which languages a request means and where its texts go, against a real server of several models
(``model_repository``: en->de, de->en, fr->en, cs/sk->en/pl): text in a language outside the
identifier's set is refused naming that language, on every API, and fails only itself; a source that
is the target is LibreTranslate's identity translation on its API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_server import StartService, assert_error, assert_libretranslate_error

from tests.conftest import relabelled_bundle

TURKISH = "Köpek parkta koşuyor"  # outside the default set: MAJOR_EUROPEAN and the served languages
ENGLISH = "A dog runs in the park."
ARABIC = "مرحبا بالعالم"  # "hello world": Arabic 0.58, Persian 0.26, the set's languages 0.0004 together


@pytest.fixture(scope="module")
def client(start_service: StartService, model_repository: Path) -> Iterator[httpx.Client]:
    server = start_service(model_dir="", models_dir=model_repository)
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def test_text_in_a_language_outside_the_set_is_refused_naming_it(client: httpx.Client) -> None:
    # Before, it was credited to English at 0.007 and translated from it, into invented words.
    error = assert_error(
        client.post("/v1/translate", json={"text": TURKISH, "target_lang": "de"}), 400, "unsupported_language"
    )
    assert error["detected_language"] == "tr" and "'tr'" in error["message"]
    libre = client.post("/translate", json={"q": TURKISH, "source": "auto", "target": "de"})
    assert_libretranslate_error(libre, 400, "tr is not supported")
    deepl = client.post("/v2/translate", json={"text": [TURKISH], "target_lang": "DE"})
    assert deepl.status_code == 400 and "'tr'" in deepl.json()["message"]


def test_in_a_mixed_request_it_fails_only_itself(client: httpx.Client) -> None:
    body = client.post("/v1/translate", json={"text": [TURKISH, ENGLISH], "target_lang": "de"}).json()
    turkish, english = body["translations"]
    assert turkish["text"] == TURKISH and "model" not in turkish
    assert turkish["detected_language"]["language"] == "tr" and turkish["error"]["detected_language"] == "tr"
    assert english["model"] == "tiny-en-de:1.0.0" and english["detected_language"]["language"] == "en"


def test_libretranslate_translates_a_language_into_itself_unchanged(client: httpx.Client) -> None:
    """As LibreTranslate (argostranslate's identity translation): before, a 400 "English (en) is not
    available as a target language from English (en)"."""
    one = client.post("/translate", json={"q": ENGLISH, "source": "en", "target": "EN", "alternatives": 2})
    assert one.status_code == 200, one.text
    assert one.json() == {"translatedText": ENGLISH, "alternatives": []}
    texts = [ENGLISH, "Two dogs."]
    form = client.post("/translate", data={"q": texts, "source": "de", "target": "de"})
    assert form.status_code == 200 and form.json() == {"translatedText": texts}
    # The service's own API refuses it: the client named two languages it cannot mean.
    own = client.post("/v1/translate", json={"text": ENGLISH, "source_lang": "en", "target_lang": "en"})
    assert_error(own, 400, "unsupported_language")
    # A language no model translates from is still refused, into itself too.
    assert_libretranslate_error(client.post("/translate", json={"q": ENGLISH, "source": "pl", "target": "pl"}), 400)


@pytest.fixture(scope="module")
def variants(
    start_service: StartService, tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    """A server of a model of two Portuguese variants into English, and en->de."""
    root = tmp_path_factory.mktemp("variants")
    relabelled_bundle(tiny_bundle, root / "pt-en", "tiny-pt-en", ["pt-BR", "pt-PT"], ["en"])
    relabelled_bundle(tiny_bundle, root / "en-de", "tiny-en-de", ["en"], ["de"])
    server = start_service(model_dir="", models_dir=root)
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def test_text_identified_as_a_language_served_as_variants_is_translated(variants: httpx.Client) -> None:
    """The identifier says "pt", which names neither "pt-BR" nor "pt-PT" alone: before, the request
    was refused whole, saying no model translates from 'pt'."""
    portuguese = "O cachorro corre no parque com uma bola vermelha."
    response = variants.post("/v1/translate", json={"text": [portuguese, ENGLISH], "target_lang": "en"})
    assert response.status_code == 200, response.text
    translated, kept = response.json()["translations"]
    assert translated["model"] == "tiny-pt-en:1.0.0" and translated["detected_language"]["language"] == "pt"
    assert kept["text"] == ENGLISH and kept["detected_language"]["language"] == "en"
    # Into German, through English: the pivot starts from the same variant.
    pivoted = variants.post("/v1/translate", json={"text": portuguese, "target_lang": "de"}).json()
    assert pivoted["model"] == "tiny-pt-en:1.0.0+tiny-en-de:1.0.0"


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


def test_a_guessed_short_text_takes_the_language_of_its_request_s_other_texts(client: httpx.Client) -> None:
    """Into English from German, French, Czech and Slovak: "Ja" alone is a guess (Slovak, the
    likeliest of them for two letters); beside a German sentence it is taken for German."""
    alone = client.post("/v1/translate", json={"text": ["Ja"], "target_lang": "en"}).json()["translations"][0]
    assert alone["detected_language"]["guessed"] is True and alone["detected_language"]["language"] != "de"
    texts = ["Ja", "Ein Hund rennt durch das grüne Gras."]
    beside = client.post("/v1/translate", json={"text": texts, "target_lang": "en"}).json()["translations"]
    assert [t["detected_language"]["language"] for t in beside] == ["de", "de"]
    assert beside[0]["detected_language"]["guessed"] is True and "guessed" not in beside[1]["detected_language"]
    assert beside[0]["model"] == beside[1]["model"]
