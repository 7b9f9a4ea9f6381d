"""Many models behind one server: routing by pair, pivoting, unloading the least recently used model
and loading it again under concurrent requests, language identification, and a broken bundle among
good ones. The bundles are relabelled copies of one tiny model (``model_repository``), so that
every route's output is known: the one-model server's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from live_server import ServiceProcess, StartService, assert_error, assert_libretranslate_error, metric, scrape

TEXTS = ["A dog runs in the park.", "The small girl plays with a red ball.", "A man sits under a tree."]


@pytest.fixture(scope="module")
def repository_server(start_service: StartService, model_repository: Path) -> ServiceProcess:
    return start_service(model_dir="", models_dir=model_repository, detect_languages="en,de,fr,cs,it,es")


@pytest.fixture(scope="module")
def lru_server(start_service: StartService, model_repository: Path) -> ServiceProcess:
    """At most one model loaded, none at start: every change of model unloads one and loads another."""
    return start_service(model_dir="", models_dir=model_repository, max_loaded_models=1, preload="none", cache_size=0)


@pytest.fixture(scope="module")
def repo(repository_server: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=repository_server.url, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def one_model(start_service: StartService) -> Iterator[Callable[[list[str]], list[str]]]:
    """What the one-model server answers for texts (the tiny model translates "en" to "de")."""
    single = start_service(engine_process=0)
    with httpx.Client(base_url=single.url, timeout=60) as c:

        def translate(texts: list[str]) -> list[str]:
            body = {"text": texts, "source_lang": "en", "target_lang": "de"}
            return [t["text"] for t in c.post("/v1/translate", json=body).json()["translations"]]

        yield translate


@pytest.fixture(scope="module")
def reference(one_model: Callable[[list[str]], list[str]]) -> dict[str, str]:
    return dict(zip(TEXTS, one_model(TEXTS), strict=True))


def translate(client: httpx.Client, **body: object) -> httpx.Response:
    return client.post("/v1/translate", json={"text": TEXTS, **body})


def test_each_pair_goes_to_its_model(repo: httpx.Client, reference: dict[str, str]) -> None:
    for source, target, model in [("en", "de", "tiny-en-de"), ("de", "en", "tiny-de-en"), ("sk", "pl", "tiny-many")]:
        response = translate(repo, source_lang=source, target_lang=target)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["model"] == f"{model}:1.0.0"
        assert [t["text"] for t in body["translations"]] == [reference[t] for t in TEXTS]


def test_a_pair_without_a_model_is_pivoted_through_english(
    repo: httpx.Client, one_model: Callable[[list[str]], list[str]]
) -> None:
    body = translate(repo, source_lang="fr", target_lang="de", num_hypotheses=2).json()
    assert body["model"] == "tiny-fr-en:1.0.0+tiny-en-de:1.0.0"
    # The same weights twice: the second model translates the first one's output.
    assert [t["text"] for t in body["translations"]] == one_model(one_model(TEXTS))
    assert all(len(t["alternatives"]) == 1 for t in body["translations"])
    alignments = translate(repo, source_lang="fr", target_lang="de", return_alignments=True)
    assert_error(alignments, 422, "invalid_request")


def test_an_unknown_pair_is_400_listing_the_served_pairs(repo: httpx.Client) -> None:
    error = assert_error(translate(repo, source_lang="de", target_lang="pl"), 400, "unsupported_language")
    assert "no model translates 'de' into 'pl'" in error["message"]
    assert {"en-de", "fr-de", "sk-pl"} <= set(error["supported_pairs"])


def test_the_repository_is_described(repo: httpx.Client) -> None:
    body = repo.get("/v1/models").json()
    models = {m["id"]: m for m in body["models"]}
    assert set(models) == {"tiny-en-de", "tiny-de-en", "tiny-fr-en", "tiny-many", "tiny-broken"}
    assert models["tiny-many"]["source_languages"] == [
        {"code": "cs", "model_code": None},
        {"code": "sk", "model_code": None},
    ]
    assert models["tiny-en-de"]["loaded"] and models["tiny-en-de"]["memory_mb"] > 0
    assert not models["tiny-broken"]["loaded"] and "could not be loaded" in models["tiny-broken"]["error"]
    pairs = {(p["source"], p["target"]): p["models"] for p in body["pairs"]}
    assert pairs["fr", "de"] == ["tiny-fr-en", "tiny-en-de"] and pairs["en", "de"] == ["tiny-en-de"]
    languages = {lang["code"]: lang["targets"] for lang in repo.get("/languages").json()}
    assert "de" in languages["fr"] and "pl" in languages["cs"] and languages["pl"] == []
    settings = repo.get("/frontend/settings").json()
    assert settings["language"]["source"]["code"] == "auto" and not settings["keyRequired"]


def test_a_broken_bundle_is_reported_and_the_others_serve(repo: httpx.Client) -> None:
    ready = repo.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "degraded" and "tiny-broken" in ready.json()["failed_models"]
    assert repo.get("/healthz").status_code == 200
    error = assert_error(translate(repo, source_lang="it", target_lang="en"), 503, "unavailable")
    assert "tiny-broken" in error["message"]
    assert translate(repo, source_lang="en", target_lang="de").status_code == 200
    samples = scrape(repo)
    assert metric(samples, "mt_model_load_failures_total", model="tiny-broken") == 1
    assert metric(samples, "mt_model_loaded", model="tiny-en-de") == 1


def test_the_source_language_is_identified_per_text(repo: httpx.Client, reference: dict[str, str]) -> None:
    german = "Der Hund schläft unter dem Baum im Garten."
    body = repo.post("/v1/translate", json={"text": [TEXTS[0], german], "target_lang": "en"}).json()
    english, translated = body["translations"]
    # Already in the target language: returned as it is, with the language identified.
    assert english == {"text": TEXTS[0], "detected_language": english["detected_language"]}
    assert english["detected_language"]["language"] == "en"
    assert translated["model"] == "tiny-de-en:1.0.0" and translated["detected_language"]["language"] == "de"
    [t] = repo.post("/v1/translate", json={"text": [TEXTS[0]], "target_lang": "de"}).json()["translations"]
    assert t["text"] == reference[TEXTS[0]] and t["detected_language"]["language"] == "en"
    assert 0.5 < t["detected_language"]["confidence"] <= 1
    named = repo.post("/v1/translate", json={"text": TEXTS[0], "source_lang": "en", "target_lang": "en"})
    assert_error(named, 400, "unsupported_language")  # named by the client: not guessed away


def test_text_in_an_unserved_language_is_refused_naming_it(repo: httpx.Client) -> None:
    body = {"text": "Dnes ráno jsem viděl psa, který běžel po parku.", "target_lang": "en"}
    assert repo.post("/v1/translate", json=body).status_code == 200  # Czech: tiny-many serves cs->en
    spanish = {"text": "El perro corre por el parque con una pelota roja.", "target_lang": "de"}
    error = assert_error(repo.post("/v1/translate", json=spanish), 400, "unsupported_language")
    assert error["detected_language"] == "es" and "'es'" in error["message"]
    libre = repo.post("/translate", json={"q": spanish["text"], "source": "auto", "target": "de"})
    assert_libretranslate_error(libre, 400, "es is not supported")


def test_symbols_numbers_and_urls_pass_through(repo: httpx.Client, reference: dict[str, str]) -> None:
    texts = ["😀😀", "12:30, 3.14 / +49 30 1234 (100%)", "https://example.org/a?b=c", f"{TEXTS[0]}\n😀👍\n{TEXTS[1]}"]
    body = repo.post("/v1/translate", json={"text": texts, "target_lang": "de"}).json()
    out = [t["text"] for t in body["translations"]]
    assert out[:3] == texts[:3]
    assert out[3] == f"{reference[TEXTS[0]]}\n😀👍\n{reference[TEXTS[1]]}"
    assert "model" not in body["translations"][0] and "detected_language" not in body["translations"][0]


def test_detect_endpoints(repo: httpx.Client) -> None:
    own = repo.post("/v1/detect", json={"text": "Der Hund schläft unter dem Baum."}).json()
    assert own["language"] == "de" and own["confidence"] > 0.5 and own["candidates"][0]["language"] == "de"
    assert {c["language"] for c in own["candidates"]} <= {"en", "de", "fr", "cs", "it", "es"}
    libre = repo.post("/detect", data={"q": "Le chien dort sous l'arbre."}).json()
    assert libre[0]["language"] == "fr" and 50 < libre[0]["confidence"] <= 100
    assert repo.post("/v1/detect", json={"text": "😀"}).json() == {
        "language": None,
        "confidence": 0.0,
        "candidates": [],
    }
    assert_error(repo.post("/v1/detect", json={"text": ""}), 422, "invalid_request")


async def _alternating(url: str, rounds: int) -> list[httpx.Response]:
    pairs = [("en", "de"), ("de", "en"), ("fr", "en")]
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        return await asyncio.gather(
            *(
                client.post("/v1/translate", json={"text": TEXTS, "source_lang": s, "target_lang": t})
                for _ in range(rounds)
                for s, t in pairs
            )
        )


def test_least_recently_used_models_unload_and_reload_under_concurrent_requests(
    lru_server: ServiceProcess, reference: dict[str, str]
) -> None:
    with httpx.Client(base_url=lru_server.url, timeout=60) as client:
        assert not any(m["loaded"] for m in client.get("/v1/models").json()["models"])
        responses = asyncio.run(_alternating(lru_server.url, rounds=4))
        assert [r.status_code for r in responses] == [200] * len(responses)
        for response in responses:
            assert [t["text"] for t in response.json()["translations"]] == [reference[t] for t in TEXTS]
        models = client.get("/v1/models").json()["models"]
        assert sum(m["loaded"] for m in models) == 1
        samples = scrape(client)
        unloads = sum(
            metric(samples, "mt_model_unloads_total", model=m) for m in ("tiny-en-de", "tiny-de-en", "tiny-fr-en")
        )
        loads = sum(
            metric(samples, "mt_model_loads_total", model=m) for m in ("tiny-en-de", "tiny-de-en", "tiny-fr-en")
        )
        assert unloads >= 2 and loads == unloads + 1
