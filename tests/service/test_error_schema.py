"""/v1/translate's error bodies on a real server hold only the fields its OpenAPI document declares."""

from __future__ import annotations

from typing import Any

import httpx


def declared_error_fields(client: httpx.Client) -> set[str]:
    """The fields of the error detail that /v1/translate's 413 answer is documented to have."""
    document = client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    response = document["paths"]["/v1/translate"]["post"]["responses"]["413"]["content"]["application/json"]
    body = _resolved(schemas, response["schema"])
    return set(_resolved(schemas, body["properties"]["error"])["properties"])


def _resolved(schemas: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref: str | None = schema.get("$ref")
    return schema if ref is None else schemas[ref.rsplit("/", 1)[1]]


def test_a_request_over_a_cost_limit_says_which_in_documented_fields(client: httpx.Client) -> None:
    # Within MT_MAX_CHARS (3000), but its alignment matrix is over MT_MAX_ALIGNMENT_CELLS (2,000,000).
    body = {"text": "x " * 1499, "source_lang": "en", "target_lang": "de", "return_alignments": True}
    response = client.post("/v1/translate", json=body)
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert (error["type"], error["setting"]) == ("payload_too_large", "MT_MAX_ALIGNMENT_CELLS")
    assert error["requested"] > error["limit"] == 2_000_000
    assert set(error) <= declared_error_fields(client), set(error) - declared_error_fields(client)
