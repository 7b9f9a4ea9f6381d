"""The HTTP contract of /v1/translate, /v1/models and the operational endpoints, on a real server."""

from __future__ import annotations

import httpx
import pytest

from engine.runner import resolve_provider

SENTENCES = ["A dog runs in the park.", "The small girl plays with a red ball.", "A man sits under a tree."]


def translate(client: httpx.Client, **body: object) -> dict:
    response = client.post("/v1/translate", json={"target_lang": "de", **body})
    assert response.status_code == 200, response.text
    return response.json()


def test_one_text_gives_one_translation_and_nothing_unasked(client: httpx.Client) -> None:
    body = translate(client, text=SENTENCES[0], source_lang="en")
    assert body["model"] == "mt-en-de:1.0.0"
    [translation] = body["translations"]
    assert isinstance(translation["text"], str) and translation["text"]
    assert translation == {"text": translation["text"], "model": body["model"]}


def test_a_list_keeps_order_and_equals_texts_sent_alone(client: httpx.Client) -> None:
    together = [t["text"] for t in translate(client, text=SENTENCES, beam_size=2)["translations"]]
    alone = [translate(client, text=s, beam_size=2)["translations"][0]["text"] for s in SENTENCES]
    assert together == alone


def test_scores_and_alternatives(client: httpx.Client) -> None:
    body = translate(client, text=SENTENCES[1], beam_size=4, num_hypotheses=3, return_scores=True)
    [t] = body["translations"]
    assert isinstance(t["score"], float)
    assert len(t["alternatives"]) == 2
    for alternative in t["alternatives"]:
        assert set(alternative) == {"text", "score"}
        assert alternative["score"] <= t["score"]  # best first
    scores = [a["score"] for a in t["alternatives"]]
    assert scores == sorted(scores, reverse=True)


def test_alignment(client: httpx.Client) -> None:
    [t] = translate(client, text="The dog sits on the car.", return_alignments=True)["translations"]
    a = t["alignment"]
    assert set(a) == {"source_tokens", "target_tokens", "weights", "source_words", "target_words", "word_alignment"}
    assert len(a["weights"]) == len(a["target_tokens"])
    for row in a["weights"]:
        assert len(row) == len(a["source_tokens"])
        assert sum(row) == pytest.approx(1.0, abs=1e-3)
    for src, tgt in a["word_alignment"]:
        assert 0 <= src < len(a["source_words"]) and 0 <= tgt < len(a["target_words"])


def test_options_are_applied(client: httpx.Client) -> None:
    long = translate(client, text=SENTENCES[1], beam_size=1)["translations"][0]["text"]
    short = translate(client, text=SENTENCES[1], beam_size=1, max_length=2)["translations"][0]["text"]
    assert len(short.split()) <= 2 < len(long.split())
    translate(client, text=SENTENCES[1], length_penalty=0.0, timeout_s=30)


def test_empty_text_and_line_structure(client: httpx.Client) -> None:
    texts = ["", "   ", "A dog runs.\nA cat sits.\n\nThe boy walks."]
    out = [t["text"] for t in translate(client, text=texts)["translations"]]
    assert out[0] == "" and out[1].strip() == ""
    assert out[2].count("\n") == texts[2].count("\n")


def test_language_codes_are_case_insensitive_and_source_is_optional(client: httpx.Client) -> None:
    a = translate(client, text=SENTENCES[0], source_lang="EN", target_lang="DE")
    b = translate(client, text=SENTENCES[0])
    assert a["translations"][0]["text"] == b["translations"][0]["text"]
    assert "detected_language" not in a["translations"][0]
    assert b["translations"][0]["detected_language"]["language"] == "en"


def test_models(client: httpx.Client) -> None:
    response = client.get("/v1/models")
    assert response.status_code == 200
    [model] = response.json()["models"]
    assert model["source_languages"] == [{"code": "en", "model_code": None}]
    assert model["target_languages"] == [{"code": "de", "model_code": None}]
    assert model["variant"] in ("fp32", "int8")
    assert model["provider"] == resolve_provider("auto")
    assert f"{model['id']}:{model['version']}" == translate(client, text="A dog.", source_lang="en")["model"]
    assert model["loaded"] and model["memory_mb"] > 0 and model["error"] is None
    assert isinstance(model["quality"], dict)
    assert response.json()["pairs"] == [{"source": "en", "target": "de", "models": [model["id"]]}]


def test_health_and_readiness(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}


def test_openapi_documents_the_api(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    assert {"/v1/translate", "/v1/models", "/translate", "/languages", "/healthz", "/readyz"} <= set(spec["paths"])
    assert client.get("/docs").status_code == 200
    # The translation routes read their bodies and keys themselves; the schema must still show both.
    native, libre = spec["paths"]["/v1/translate"]["post"], spec["paths"]["/translate"]["post"]
    body = native["requestBody"]["content"]["application/json"]["schema"]
    assert {"text", "target_lang", "beam_size", "return_alignments"} <= set(body["properties"])
    assert set(body["required"]) == {"text", "target_lang"}
    assert native["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TranslateResponse"
    }
    assert {"application/json", "application/x-www-form-urlencoded"} <= set(libre["requestBody"]["content"])
    [scheme_name] = native["security"][0]
    assert libre["security"] == native["security"]
    assert spec["components"]["securitySchemes"][scheme_name] == {
        "type": "http",
        "scheme": "bearer",
        "description": "A managed key (`python -m service keys create`) or one of MT_API_KEYS.",
    }


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_json_body_is_read_whatever_its_content_type(client: httpx.Client, content_type: str | None) -> None:
    # `curl -d '{...}'` labels JSON as a form; the body is JSON either way.
    headers = {"Content-Type": content_type} if content_type else {}
    body = b'{"text": "A dog runs.", "target_lang": "de"}'
    response = client.post("/v1/translate", content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["translations"][0]["text"]


def test_a_request_that_needed_no_model_names_none(client: httpx.Client) -> None:
    """Texts with nothing to translate come back as they are: the response said `"model": ""`."""
    body = translate(client, text=["123", "😀", ""])
    assert "model" not in body
    assert [t["text"] for t in body["translations"]] == ["123", "😀", ""]
