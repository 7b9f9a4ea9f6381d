"""The OpenAPI document of one service: the routes' schemas completed with what only it knows.

The request schemas (``service.schemas``) hold placeholders where the answer depends on the running
service: the language codes its models serve and the pairs they make, its request limits. Whether
an API key is required depends on its settings. ``install`` makes ``app.openapi()`` fill them in,
so that /openapi.json (and /docs) describes exactly what this service accepts. Until the model
repository is read the languages are not known: that document is served but not kept. Schemas that
routes write into the document themselves (``schemas.embedded_schema``) bring the models they refer
to along in ``$defs``: they join the document's components.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI

from engine.repository import Router
from service.routes.libretranslate_errors import libretranslate_document
from service.runtime import Runtime
from service.schemas import BEARER_SCHEME, LANGUAGE_PAIR, SAME_LANGUAGE, SERVED_LANGUAGES, SETTING_LIMITS
from service.settings import Settings

AUTO = "auto"  # the source language that asks for identification
# The request examples are in English: they name a pair from English when one is served.
EXAMPLE_SOURCE = "en"


def install(app: FastAPI, runtime: Runtime) -> None:
    """Replace ``app.openapi`` with the document of this service."""
    build = app.openapi  # FastAPI's: builds a fresh document, kept in app.openapi_schema

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = build()
        complete(document, runtime.settings, runtime.router)
        if runtime.router is None:  # the languages are not known yet: built again next time
            app.openapi_schema = None
        return document

    app.openapi = openapi


def complete(document: dict[str, Any], settings: Settings, router: Router | None) -> None:
    """Fill the placeholders of ``document`` in; the languages only when ``router`` is known."""
    _authentication(document, required=settings.keys_required)
    libretranslate_document(document)  # its routes' errors in its shape
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for schema in list(_objects(document)):
        for name, definition in schema.pop("$defs", {}).items():  # of an ``embedded_schema``
            components.setdefault(name, definition)
        for keyword, setting in schema.pop(SETTING_LIMITS, {}).items():
            schema[keyword] = getattr(settings, setting)
        side = schema.pop(SERVED_LANGUAGES, None)
        fields = schema.pop(LANGUAGE_PAIR, None)
        same = schema.pop(SAME_LANGUAGE, False)
        if router is None or not router.pairs():  # not read yet, or nothing to serve: no codes to list
            continue
        if side is not None:
            _served(schema, router, side)
        if fields is not None:
            _pairs(schema, router, *fields, same_language=same)


def _authentication(document: dict[str, Any], *, required: bool) -> None:
    """Declare the API key where operations ask for it, or, with no keys configured, take the
    operations' security and their 401 out: such a service never answers 401."""
    if required:
        schemes = document.setdefault("components", {}).setdefault("securitySchemes", {})
        description = "A managed key (`python -m service keys create`) or one of MT_API_KEYS."
        schemes[BEARER_SCHEME] = {"type": "http", "scheme": "bearer", "description": description}
        return
    for path in document["paths"].values():
        for operation in path.values():
            if operation.pop("security", None) is not None:
                operation["responses"].pop("401", None)


def _served(schema: dict[str, Any], router: Router, side: str) -> None:
    """A language field: one of the served codes (the enum replaces the length limits)."""
    schema.pop("minLength", None)
    schema.pop("maxLength", None)
    schema["enum"] = [AUTO, *router.sources()] if side == "source" else _targets(router)


def _pairs(
    schema: dict[str, Any], router: Router, source_field: str, target_field: str, *, same_language: bool = False
) -> None:
    """An object naming a language pair: for each target, the sources it is not served from are
    excluded (but the target itself with ``same_language``), and the examples name a served pair."""
    served = set(router.pairs())
    branches = []
    for target in _targets(router):
        branch: dict[str, Any] = {target_field: {"const": target}}
        unserved = [s for s in router.sources() if (s, target) not in served and not (same_language and s == target)]
        if unserved:
            branch[source_field] = {"not": {"enum": unserved}}
        branches.append({"properties": branch})
    schema.setdefault("allOf", []).append({"anyOf": branches})
    pairs = router.pairs()
    source, target = next((pair for pair in pairs if pair[0] == EXAMPLE_SOURCE), pairs[0])
    for example in schema.get("examples", []):
        example.update({source_field: source, target_field: target})


def _targets(router: Router) -> list[str]:
    return sorted({target for _, target in router.pairs()})


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in ``node``, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for item in node:
            yield from _objects(item)
