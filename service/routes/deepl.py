"""DeepL's API v2, so that DeepL's clients (the official ``deepl`` libraries among them) work with
this service by changing only their server URL.

A thin layer over the same runtime as the other APIs: texts go through ``Runtime.translate`` as a
``TranslationJob``, documents through ``service.documents.translate_document`` (the formats of
``/v1/translate_file``) and are kept for download in the app's ``FileStore``, glossaries in
``service.glossaries``. Languages are named by DeepL's codes in any case: a regional target
(``EN-GB``, ``EN-US``, ``PT-BR``) is translated by the model of its language, and is listed as
DeepL lists it. The key is DeepL's ``Authorization: DeepL-Auth-Key <key>`` (or ``Bearer``),
checked against MT_API_KEYS. Errors are DeepL's: ``{"message": ...}`` with its statuses (403 for a
key, 400 for every invalid request, 404 for an unknown resource, 456 for a key's quota), rendered
from the service's own error types by ``routes.deepl_errors``.

Accepted as DeepL documents them and not honoured: ``formality``, ``context``, ``model_type``,
``split_sentences`` (sentences are always split at punctuation and line breaks),
``outline_detection``, ``non_splitting_tags``, ``splitting_tags`` and ``ignore_tags``. A
``glossary_id`` is applied as on /v1 (the glossaries are the same store, the same key's), with
DeepL's rules: ``source_lang`` is required with it, and it must be for the translation's languages.
``preserve_formatting`` keeps the source's first-letter case and its lack of final punctuation.
"""

from __future__ import annotations

import logging
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import Scope

from engine.api import TranslationOptions
from engine.documents import SUPPORTED_EXTENSIONS
from engine.languages import LANGUAGE_NAMES, broader, primary_subtag
from engine.repository import Router
from service.document_jobs import Document, DocumentJobs
from service.documents import FileJob
from service.errors import (
    InvalidRequest,
    NotFound,
    Unauthorized,
    UnsupportedLanguage,
    UnsupportedMediaType,
    describe_validation,
)
from service.glossaries import (
    MAX_NAME_CHARS,
    GlossaryInfo,
    GlossaryStore,
    parse_entries,
    quoted_id,
    to_tsv,
    variant_language,
)
from service.routes.common import Parameters, authorized, get_runtime, read_parameters, unless_disconnected
from service.routes.deepl_errors import DeepLRoute
from service.routes.files import DownloadOnce, _form
from service.routes.glossaries import entries_checked, glossary_store, owner, stored, stored_glossary
from service.runtime import Runtime
from service.translation import JobGlossary, TranslationJob

log = logging.getLogger(__name__)
T = TypeVar("T")

UPLOAD_PATHS = ("/v2/document",)
# /v2/usage's character_limit for a caller without a monthly quota (``service.keys``).
CHARACTER_LIMIT = 1_000_000_000_000
# DeepL's target codes for a language served under its bare code, and their names.
REGIONAL_TARGETS = {"en": ("EN-GB", "EN-US"), "pt": ("PT-BR", "PT-PT")}
REGIONAL_NAMES = {
    "EN-GB": "English (British)",
    "EN-US": "English (American)",
    "PT-BR": "Portuguese (Brazilian)",
    "PT-PT": "Portuguese (European)",
}
_LIST_FIELDS = frozenset({"text", "non_splitting_tags", "splitting_tags", "ignore_tags", "glossary_ids"})
_ENDS_SENTENCE = ".!?。！？"


# Not in the OpenAPI document: these are DeepL's routes, described by DeepL's own documentation.
router = APIRouter(route_class=DeepLRoute, include_in_schema=False)


# -- request bodies -------------------------------------------------------------------------------


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _tags(value: Any) -> Any:
    """Tag names as DeepL takes them: a list, or comma-separated in one string or in several."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [tag.strip() for v in value for tag in v.split(",") if tag.strip()]
    return value


def _string(value: Any) -> Any:
    """split_sentences in JSON may be a number: 0 is "0"."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _flag(value: Any) -> Any:
    """A DeepL boolean: JSON's true or false, or as a form writes it "0" or "1" (or "true", "false",
    as a form of its OpenAPI document's booleans is written); pydantic's lax booleans ("yes", "on",
    "t") are no values of DeepL's, refused rather than guessed at."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in _FLAGS:
        return _FLAGS[value]
    raise ValueError("must be 0 or 1 (in JSON, false or true)")


_FLAGS = {"0": False, "1": True, "false": False, "true": True}
Flag = Annotated[bool, BeforeValidator(_flag)]
Tags = Annotated[list[str], BeforeValidator(_tags)]
Formality = Literal["default", "more", "less", "prefer_more", "prefer_less"]
ModelType = Literal["quality_optimized", "prefer_quality_optimized", "latency_optimized"]


class _Body(BaseModel):
    # Lax: a form's values are strings (its booleans are ``Flag``s); unknown fields are ignored, as DeepL does.
    model_config = ConfigDict(extra="ignore")


class TranslateBody(_Body):
    text: Annotated[list[str], BeforeValidator(_as_list), Field(min_length=1)]
    target_lang: str
    source_lang: str | None = None
    context: str | None = None
    show_billed_characters: Flag = False
    split_sentences: Annotated[Literal["0", "1", "nonewlines"] | None, BeforeValidator(_string)] = None
    preserve_formatting: Flag = False
    formality: Formality = "default"
    model_type: ModelType | None = None
    glossary_id: str | None = None
    tag_handling: Literal["html", "xml"] | None = None
    tag_handling_version: Literal["v1", "v2"] | None = None
    outline_detection: Flag = True
    non_splitting_tags: Tags = []
    splitting_tags: Tags = []
    ignore_tags: Tags = []


class DocumentBody(_Body):
    target_lang: str
    source_lang: str | None = None
    filename: str | None = None
    output_format: str | None = None
    formality: Formality = "default"
    glossary_id: str | None = None


class DocumentKeyBody(_Body):
    document_key: str


class GlossaryBody(_Body):
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    source_lang: str
    target_lang: str
    entries: str
    entries_format: Literal["tsv", "csv"] = "tsv"


def _validated(model: type[T], fields: dict[str, Any]) -> T:
    """``fields`` as ``model``; DeepL's 400 (our InvalidRequest) naming the fields that are wrong."""
    try:
        return model.model_validate(fields)  # type: ignore[attr-defined,no-any-return]
    except ValidationError as e:
        raise InvalidRequest(describe_validation(e.errors(include_url=False))) from None


async def _fields(request: Request) -> dict[str, Any]:
    """The request's parameters: its query's, then its body's (JSON or a form) over them. A repeated
    field is a list where DeepL takes a list (``text``), else its last value."""
    sent = await read_parameters(request, malformed_json=InvalidRequest, blank_json=True)
    fields: dict[str, Any] = {}
    for part in (sent.query, sent.form):
        fields |= {key: v if key in _LIST_FIELDS else v[-1] for key, v in Parameters.grouped(part).items()}
    return fields if sent.json is None else {**fields, **sent.json}


# -- keys, languages, state -----------------------------------------------------------------------


def _key(request: Request) -> str | None:
    """The key of ``Authorization: DeepL-Auth-Key <key>`` (or ``Bearer <key>``)."""
    scheme, _, key = request.headers.get("authorization", "").strip().partition(" ")
    return key.strip() or None if scheme.lower() in ("deepl-auth-key", "bearer") else None


async def _authorize(request: Request, runtime: Runtime) -> str | None:
    key = _key(request)
    if runtime.settings.keys_required and not key:
        raise Unauthorized("an API key is required: Authorization: DeepL-Auth-Key <key>")
    await authorized(request, key)
    return key


def _targets(router: Router) -> list[str]:
    return sorted({target for _, target in router.pairs()})


def _language(router: Router, code: str, side: Literal["source", "target"]) -> str:
    """The served language a DeepL code names (EN-GB: en), or DeepL's 400: a variant DeepL does not
    name (DE-XX) is no language, not its prefix's."""
    served = {c.lower(): c for c in (router.sources() if side == "source" else _targets(router))}
    # ZH-HANT is zh-Hant alone: a model of bare zh writes Simplified Chinese (``languages.broader``).
    names = [code.strip().lower(), *(broader(code) if variant_language(code) else [])]
    if (name := next((n for n in names if n in served), None)) is not None:
        return served[name]
    raise UnsupportedLanguage(f"Value for '{side}_lang' not supported.")


def _glossary_language(router: Router, code: str, side: Literal["source", "target"]) -> str:
    """``_language`` of a glossary's: DeepL defines glossaries on languages and refuses a variant
    (a glossary for EN is used by translations into EN-GB and EN-US alike)."""
    language = variant_language(code)
    if language is not None:
        raise UnsupportedLanguage(
            f"Value for '{side}_lang' not supported: a glossary is for a language ({language.upper()}), "
            "not one of its variants."
        )
    return _language(router, code, side)


def _deepl_code(code: str) -> str:
    return code.upper()


def _name(code: str) -> str:
    return REGIONAL_NAMES.get(code) or LANGUAGE_NAMES.get(primary_subtag(code), code)


async def _glossaries(request: Request) -> tuple[str, GlossaryStore]:
    """The caller's key, checked, as the owner of glossaries, and the store."""
    runtime = await get_runtime(request)
    return owner(runtime, await _authorize(request, runtime)), glossary_store(request)


# -- translating ----------------------------------------------------------------------------------


@router.post("/v2/translate")
async def translate(request: Request) -> JSONResponse:
    runtime = await get_runtime(request)
    key = await _authorize(request, runtime)
    body = _validated(TranslateBody, await _fields(request))
    _, served = runtime.serving()
    target = _language(served, body.target_lang, "target")
    source = _language(served, body.source_lang, "source") if body.source_lang else None
    glossary = await _glossary(request, key, body.glossary_id, source, target)
    options = TranslationOptions(format=body.tag_handling or "text")
    # A text into its own language (EN into EN-US) comes back as it is, with a 200, as DeepL answers
    # it: the models do not convert between a language's variants.
    job = TranslationJob(body.text, target, source, options, api_key=key, glossary=glossary, keep_same_language=True)
    # Counted in flight, as the middleware counts the other translation routes (TRANSLATION_PATHS):
    # refused while draining, and waited for by the drain.
    runtime.in_flight.enter()
    try:
        async with runtime.access.metered(await authorized(request, key), sum(map(len, body.text))):
            done = await unless_disconnected(request, runtime.translate(job))
    finally:
        runtime.in_flight.leave()
    detections = done.detections or [None] * len(done.results)
    # DeepL names a language for every text, and its clients read one (some as an enumeration that
    # "" is not in): a text with nothing to identify ("42", "") takes the language identified for
    # the request's other texts, else the first that the service translates into the target from.
    found = next((d.language for d in detections if d is not None and d.language), None)
    found = found or min(s for s, t in served.pairs() if t == target)
    translations = []
    for text, result, detection in zip(body.text, done.results, detections, strict=True):
        language = source or (detection.language if detection and detection.language else found)
        translated = result.text
        if body.preserve_formatting and options.format == "text":
            translated = _preserve_formatting(text, translated)
        out: dict[str, Any] = {"detected_source_language": _deepl_code(language), "text": translated}
        if body.show_billed_characters:
            out["billed_characters"] = len(text)
        translations.append(out)
    return JSONResponse({"translations": translations})


def _preserve_formatting(source: str, translated: str) -> str:
    """DeepL's preserve_formatting: no capital the source's first letter has not, no final
    punctuation the source has not."""
    src, out = source.strip(), translated.strip()
    if not src or not out:
        return translated
    first = len(translated) - len(translated.lstrip())
    if src[0].islower() and out[0].isupper():
        translated = translated[:first] + translated[first].lower() + translated[first + 1 :]
    last = len(translated.rstrip()) - 1
    if src[-1] not in _ENDS_SENTENCE and translated[last] in _ENDS_SENTENCE:
        translated = translated[:last] + translated[last + 1 :]
    return translated


@router.api_route("/v2/languages", methods=["GET", "POST"])
async def languages(request: Request) -> JSONResponse:
    runtime = await get_runtime(request)
    await _authorize(request, runtime)
    kind = (await _fields(request)).get("type", "source")
    _, served = runtime.serving()
    if kind == "source":
        codes = [_deepl_code(c) for c in sorted(served.sources())]
        return JSONResponse([{"language": c, "name": _name(c)} for c in codes])
    if kind != "target":
        raise InvalidRequest("Value for 'type' not supported.")
    codes = [code for t in _targets(served) for code in REGIONAL_TARGETS.get(t, (_deepl_code(t),))]
    return JSONResponse([{"language": c, "name": _name(c), "supports_formality": False} for c in codes])


@router.api_route("/v2/usage", methods=["GET", "POST"])
async def usage(request: Request) -> JSONResponse:
    runtime = await get_runtime(request)
    caller = await authorized(request, await _authorize(request, runtime))
    count, limit = await runtime.access.usage(caller)
    return JSONResponse({"character_count": count, "character_limit": CHARACTER_LIMIT if limit is None else limit})


# -- documents ------------------------------------------------------------------------------------


@router.post("/v2/document")
async def upload_document(request: Request) -> JSONResponse:
    runtime = await get_runtime(request)
    key = await _authorize(request, runtime)  # before the upload is read
    fields, uploaded_name = await _form(request, key=key)
    data = fields.pop("file", None)
    if not isinstance(data, bytes):
        raise InvalidRequest("Parameter 'file' not specified.")
    body = _validated(DocumentBody, fields)
    filename = PurePosixPath((body.filename or uploaded_name).replace("\\", "/")).name
    extension = PurePosixPath(filename).suffix.lower()
    if extension not in SUPPORTED_EXTENSIONS:
        raise UnsupportedMediaType(
            f"Invalid file data: {extension or 'no extension'!r} is not one of {', '.join(SUPPORTED_EXTENSIONS)}"
        )
    if body.output_format and "." + body.output_format.lower().lstrip(".") != extension:
        raise InvalidRequest("Value for 'output_format' not supported: the translation keeps the file's format.")
    _, served = runtime.serving()
    target = _language(served, body.target_lang, "target")
    source = _language(served, body.source_lang, "source") if body.source_lang else None
    glossary = await _glossary(request, key, body.glossary_id, source, target)
    job = FileJob(data, filename, target, source, api_key=key, glossary=glossary)
    document = await _jobs(request).submit(
        job,
        owner=owner(runtime, key),
        keys_required=bool(runtime.settings.keys_required),
        glossary_id=body.glossary_id,
    )
    return JSONResponse({"document_id": document.document_id, "document_key": document.key})


def _jobs(request: Request) -> DocumentJobs:
    jobs: DocumentJobs = request.app.state.document_jobs
    return jobs


async def _document(request: Request, document_id: str) -> tuple[DocumentJobs, Document]:
    runtime = await get_runtime(request)
    key = await _authorize(request, runtime)
    body = _validated(DocumentKeyBody, await _fields(request))
    jobs = _jobs(request)
    return jobs, await jobs.find(document_id, owner=owner(runtime, key), document_key=body.document_key)


@router.post("/v2/document/{document_id}")
async def document_status(request: Request, document_id: str) -> JSONResponse:
    _, document = await _document(request, document_id)
    status: dict[str, Any] = {"document_id": document.document_id, "status": document.status}
    if document.status in ("queued", "translating"):
        status["seconds_remaining"] = 1
    elif document.status == "done":
        status["billed_characters"] = document.characters
    else:
        status["error_message"] = document.error
    return JSONResponse(status)


@router.post("/v2/document/{document_id}/result")
async def document_result(request: Request, document_id: str) -> Response:
    jobs, document = await _document(request, document_id)
    stored = await jobs.take_result(document)
    # Deleted once sent: it cannot be downloaded again, so it must not wait on the disk for its expiry.
    return DownloadOnce(jobs.files, stored)


# -- glossaries -----------------------------------------------------------------------------------


def _glossary_json(glossary: GlossaryInfo) -> dict[str, Any]:
    return {
        "glossary_id": glossary.glossary_id,
        "name": glossary.name,
        "ready": True,
        "source_lang": glossary.source_lang,
        "target_lang": glossary.target_lang,
        "creation_time": glossary.creation_time,
        "entry_count": glossary.entry_count,
    }


async def _glossary(
    request: Request, key: str | None, glossary_id: str | None, source: str | None, target: str
) -> JobGlossary | None:
    """A translation's glossary, as DeepL checks it: with source_lang, existing, for its languages."""
    if glossary_id is None:
        return None
    if source is None:
        raise InvalidRequest("Use of a glossary requires the source_lang parameter to be set.")
    glossary = await stored_glossary(request, key, glossary_id)
    if glossary is None:
        raise InvalidRequest(f"Value for 'glossary_id' not supported: no glossary {quoted_id(glossary_id)}.")
    if (glossary.source_lang, glossary.target_lang) != (primary_subtag(source), primary_subtag(target)):
        raise InvalidRequest(
            f"The glossary is for {glossary.source_lang.upper()} to {glossary.target_lang.upper()}, "
            "not for the languages of this translation."
        )
    return glossary


@router.get("/v2/glossary-language-pairs")
async def glossary_language_pairs(request: Request) -> JSONResponse:
    runtime = await get_runtime(request)
    await _authorize(request, runtime)
    _, served = runtime.serving()
    pairs = [{"source_lang": s, "target_lang": t} for s, t in served.pairs()]
    return JSONResponse({"supported_languages": pairs})


@router.post("/v2/glossaries")
async def create_glossary(request: Request) -> JSONResponse:
    runtime = await get_runtime(request)
    key = await _authorize(request, runtime)
    body = _validated(GlossaryBody, await _fields(request))
    _, served = runtime.serving()
    source = _glossary_language(served, body.source_lang, "source")
    target = _glossary_language(served, body.target_lang, "target")
    if (source, target) not in served.pairs():
        raise UnsupportedLanguage(f"Unsupported glossary language pair: {source.upper()} to {target.upper()}.")
    with entries_checked():
        entries = parse_entries(body.entries, body.entries_format, (source, target), served)
    store, whose = glossary_store(request), owner(runtime, key)
    glossary = await stored(lambda: store.create(whose, body.name, source, target, entries), write=True)
    return JSONResponse(_glossary_json(glossary), status_code=201)


@router.get("/v2/glossaries")
async def list_glossaries(request: Request) -> JSONResponse:
    whose, store = await _glossaries(request)
    glossaries = await stored(lambda: store.list(whose))
    return JSONResponse({"glossaries": [_glossary_json(g) for g in glossaries]})


@router.get("/v2/glossaries/{glossary_id}")
async def get_glossary(request: Request, glossary_id: str) -> JSONResponse:
    whose, store = await _glossaries(request)
    glossary = await stored(lambda: store.get(whose, glossary_id))
    if glossary is None:
        raise NotFound("Glossary not found.")
    return JSONResponse(_glossary_json(glossary))


@router.get("/v2/glossaries/{glossary_id}/entries")
async def glossary_entries(request: Request, glossary_id: str) -> Response:
    whose, store = await _glossaries(request)
    entries = await stored(lambda: store.entries(whose, glossary_id))
    if entries is None:
        raise NotFound("Glossary not found.")
    return Response(to_tsv(entries), media_type="text/tab-separated-values; charset=utf-8")


@router.delete("/v2/glossaries/{glossary_id}", status_code=204)
async def delete_glossary(request: Request, glossary_id: str) -> Response:
    whose, store = await _glossaries(request)
    if not await stored(lambda: store.delete(whose, glossary_id), write=True):
        raise NotFound("Glossary not found.")
    return Response(status_code=204)


# Last: any other request under /v2 is DeepL's 404, or its 405 for a path of another method, in its shape.
@router.api_route("/v2/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
async def unknown(request: Request, path: str) -> Response:
    allowed = _methods_of(request.scope)
    if allowed:
        raise HTTPException(405, headers={"Allow": ", ".join(sorted(allowed))})
    raise NotFound(f"Not found: /v2/{path}")


def _methods_of(scope: Scope) -> set[str]:
    """The methods the routes before this catch-all answer at the request's path (Starlette's
    partial match: the path is theirs, the method is not)."""
    return {
        method
        for route in router.routes
        if isinstance(route, APIRoute) and route.endpoint is not unknown and route.matches(scope)[0] == Match.PARTIAL
        for method in route.methods
    }
