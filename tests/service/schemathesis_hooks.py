"""Schemathesis hooks of test_openapi.py: ``positive_data_acceptance`` less what no schema can say.

A translation request that its schema allows can still be refused for what its texts are: a text
identified as a language that no model translates from (400 ``unsupported_language`` naming the
``detected_language``), texts over ``MT_MAX_CHARS`` together when each is within it (413), or
``format`` html or xml with a text that is not well-formed markup (422 ``malformed_markup``). A
file can be refused for what it is: its type (415), its content (422 ``invalid_request`` about the
``file``), a paragraph over ``MT_MAX_CHARS`` (413). The LibreTranslate routes refuse the same in
its shape and words, all with 400. Every other refusal of schema-valid data fails, as the built-in
check (which the run excludes) would.
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance

MAX_CHARS = int(os.environ["MT_MAX_CHARS"])


@schemathesis.check
def positive_data_acceptance_unless_refused_for_its_texts(ctx: Any, response: Any, case: Any) -> bool | None:
    if _refused_for_its_texts(response.status_code, response.content, case.body):
        return None
    return positive_data_acceptance(ctx, response, case)


def _refused_for_its_texts(status: int, content: bytes, body: Any) -> bool:
    if status not in (400, 413, 415, 422) or not isinstance(body, dict):
        return False
    error = json.loads(content).get("error", {})
    if isinstance(error, str):  # LibreTranslate's routes: {"error": "<message>"}, always 400
        return _refused_in_libretranslates_words(error, body)
    unserved = status == 400 and error.get("type") == "unsupported_language" and "detected_language" in error
    if "file" in body:  # its type, its content, or a paragraph of it over MT_MAX_CHARS
        return status == 415 or error.get("message", "").startswith(("file: ", "text ")) or unserved
    if status == 422 and error.get("type") == "invalid_glossary":  # duplicates a schema cannot rule out
        return True
    if status == 422:
        return error.get("type") == "malformed_markup" and body.get("format") in ("html", "xml")
    if status == 400:
        return unserved
    texts = body.get("text", body.get("q", []))
    texts = [texts] if isinstance(texts, str) else texts
    return error.get("type") == "payload_too_large" and sum(map(len, texts)) > MAX_CHARS


def _refused_in_libretranslates_words(message: str, body: dict[str, Any]) -> bool:
    """The same refusals as the LibreTranslate routes word them (``errors.libretranslate_response``)."""
    unserved = message.endswith(" is not supported") or message.startswith("could not identify")
    if "file" in body:  # its type (415 there), its content, a paragraph over MT_MAX_CHARS, its language
        words = ("Invalid request: unsupported file type", "Invalid request: file: ", "Invalid request: text ")
        return message.startswith(words) or "which no model translates from" in message or unserved
    if body.get("source") == "auto" and unserved:  # identified as a language no model translates from
        return True
    if body.get("format") == "html" and message.startswith("Invalid request: text ") and "malformed" in message:
        return True
    texts = body.get("q", [])
    texts = [texts] if isinstance(texts, str) else texts
    return "exceeds text limit" in message and sum(map(len, texts)) > MAX_CHARS
