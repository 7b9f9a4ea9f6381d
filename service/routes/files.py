"""File translation: ``POST /v1/translate_file`` answers with the translated file; LibreTranslate's
``POST /translate_file`` with ``{"translatedFileUrl": ...}``, a link to ``GET /download_file/<name>``
that works for MT_FILE_EXPIRY_S (``service.file_store``).

Both take a multipart form with the file in ``file`` (its name's extension names its format; at
most MT_MAX_FILE_BYTES) and the languages; the file is translated by ``service.documents``. The
upload is read in memory and its spooled temporary file closed (deleted) before translating.

The API key is checked before the upload is read: from the ``Authorization`` header before the
body, or (LibreTranslate's) from the ``api_key`` field once the file part begins, so that a
refused request costs the form fields before the file, never the file. At most MT_MAX_UPLOADS
uploads are received at once (``UploadSlots``): one more is refused (429) before its file is read,
and one that takes longer than MT_UPLOAD_TIMEOUT_S to arrive, or arrives slower than MT_MIN_BODY_RATE
(``middleware.SlowBody``), is refused (408) and its slot freed.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import ExitStack, aclosing, contextmanager
from pathlib import PurePosixPath
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.types import Receive, Scope, Send

from engine.documents import MEDIA_TYPES, SUPPORTED_EXTENSIONS
from service.documents import FileJob, translate_document
from service.errors import InvalidRequest, NotFound, Overloaded, RequestTimeout, Unauthorized
from service.file_store import FileStore, StoredFile
from service.routes.common import (
    authorized,
    bearer_key,
    error_responses,
    form_error,
    get_runtime,
    unless_disconnected,
)
from service.routes.glossaries import NO_GLOSSARY, request_glossary
from service.runtime import Runtime
from service.schemas import (
    BEARER_AUTH,
    LANGUAGE_PAIR,
    OTHER_LANGUAGE_NAMES,
    SourceLanguage,
    TargetLanguage,
    form_body,
    validated,
)

router = APIRouter()

UPLOAD_PATHS = ("/v1/translate_file", "/translate_file")
# Room for a form's other fields and its part headers, on top of MT_MAX_FILE_BYTES (service.app).
FORM_OVERHEAD_BYTES = 64 << 10
MAX_FORM_FIELDS = 16
# An upload of MT_MAX_FILE_BYTES takes seconds on a fast link: sooner, a slot is unlikely to be free.
UPLOAD_RETRY_AFTER_S = 5
# Where the service has keys, one key may hold a quarter of the upload slots: 16 slow uploads with one
# key held every other key's off.
KEY_SHARE_OF_UPLOADS = 4
FILE_DESCRIPTION = (
    f"The file, by its name's extension one of {', '.join(SUPPORTED_EXTENSIONS)} (else 415); "
    "at most MT_MAX_FILE_BYTES (413). Text files must be UTF-8."
)
# A file part of the form, as FastAPI documents an UploadFile in OpenAPI 3.1.
FileUpload = Annotated[bytes, WithJsonSchema({"type": "string", "contentMediaType": "application/octet-stream"})]
FILE_ERRORS = error_responses(400, 401, 413, 415, 422, 429, 503, 504, 507)
_BINARY = {"schema": {"type": "string", "format": "binary"}}
_FILE_CONTENT = {media_type.split(";")[0]: _BINARY for media_type in MEDIA_TYPES}
_DISPOSITION = {"Content-Disposition": {"description": "attachment, named as the upload", "schema": {"type": "string"}}}
FILE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"description": "The translated file", "content": _FILE_CONTENT, "headers": _DISPOSITION}
}


class FileRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={LANGUAGE_PAIR: ["source_lang", "target_lang"]}
    )

    file: FileUpload = Field(description=FILE_DESCRIPTION)
    source_lang: SourceLanguage = Field(
        "auto", description=f'"auto" = identified from the file. {OTHER_LANGUAGE_NAMES}'
    )
    target_lang: TargetLanguage = Field(description=OTHER_LANGUAGE_NAMES)
    glossary: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="The id of a glossary (/v1/glossaries) whose terms every text of the file must use: "
        "404 if there is none; its languages must be the file's (400).",
    )


class LibreFileRequest(BaseModel):
    """LibreTranslate's ``/translate_file`` form; unknown fields are ignored, as it does."""

    model_config = ConfigDict(extra="ignore", strict=True, json_schema_extra={LANGUAGE_PAIR: ["source", "target"]})

    file: FileUpload = Field(description=FILE_DESCRIPTION)
    source: SourceLanguage = Field("auto", description=f'"auto" = identified from the file. {OTHER_LANGUAGE_NAMES}')
    target: TargetLanguage = Field(description=OTHER_LANGUAGE_NAMES)
    api_key: str | None = None


class LibreFileResponse(BaseModel):
    translatedFileUrl: str = Field(
        description="GET it within MT_FILE_EXPIRY_S; the file keeps the upload's name. Under MT_PUBLIC_URL when "
        "the service sets it, else a path to resolve against the URL the request was sent to."
    )


@router.post(
    "/v1/translate_file",
    response_class=Response,
    responses={**FILE_RESPONSE, **FILE_ERRORS, **NO_GLOSSARY},
    tags=["translation"],
    openapi_extra={**form_body(FileRequest), **BEARER_AUTH},
)
async def translate_file(request: Request) -> Response:
    """Translate a file: .txt, .md, .html, .srt or .docx, its structure and formatting kept."""
    runtime = await get_runtime(request)
    key = bearer_key(request)
    await authorized(request, key)  # before the upload is read
    fields, filename = await _form(request, key=key)
    body = validated(FileRequest, fields)
    glossary = await request_glossary(request, body.glossary)
    job = FileJob(body.file, filename, body.target_lang, body.source_lang, api_key=key, glossary=glossary)
    data, document = await unless_disconnected(request, translate_document(runtime, request.app.state.documents, job))
    return Response(data, media_type=document.media_type, headers={"Content-Disposition": attachment(filename)})


@router.post(
    "/translate_file",
    response_model=LibreFileResponse,
    responses=FILE_ERRORS,
    tags=["LibreTranslate compatibility"],
    openapi_extra={**form_body(LibreFileRequest), **BEARER_AUTH},
)
async def libretranslate_file(request: Request) -> LibreFileResponse:
    """LibreTranslate's translate_file: a link to the translated file, valid for MT_FILE_EXPIRY_S."""
    runtime = await get_runtime(request)
    header_key = bearer_key(request)
    fields, filename = await _form(request, before_file=_key_check(runtime, header_key))
    body = validated(LibreFileRequest, fields)
    key = body.api_key or header_key
    await authorized(request, key)  # a managed key ``_key_check`` let through unread
    job = FileJob(body.file, filename, body.target, body.source, api_key=key)
    data, document = await unless_disconnected(request, translate_document(runtime, request.app.state.documents, job))
    owner = key if runtime.settings.keys_required else None
    name = await _store(request).put(data, filename=filename, media_type=document.media_type, owner=owner)
    return LibreFileResponse(translatedFileUrl=_download_url(request, runtime, name))


@router.get(
    "/download_file/{name}",
    response_class=Response,
    responses={**FILE_RESPONSE, **error_responses(404)},
    tags=["LibreTranslate compatibility"],
)
async def download_file(request: Request, name: str) -> Response:
    """A file translated by /translate_file. Its unguessable name is the only key it needs."""
    stored = await _store(request).get(name)
    if stored is None:
        raise NotFound("no such file: translated files are deleted MT_FILE_EXPIRY_S after they are made")
    return Response(stored.data, media_type=stored.media_type, headers=_download_headers(stored))


class DownloadOnce(Response):
    """A stored file sent once, then deleted from the store however its response ends: sent, its
    client gone or its send failed (a response's background task runs only after a send that did
    not raise, which left a file nobody could download again holding disk and its key's share
    until it expired). Deleting needs no disk space: it frees the file's even on a full disk."""

    def __init__(self, store: FileStore, stored: StoredFile) -> None:
        super().__init__(stored.data, media_type=stored.media_type, headers=_download_headers(stored))
        self.store = store
        self.name = stored.name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await asyncio.shield(self.store.delete(self.name))


def _download_headers(stored: StoredFile) -> dict[str, str]:
    return {"Content-Disposition": attachment(stored.filename)}


FieldsCheck = Callable[[dict[str, str]], str | None]  # the text fields before the file -> the upload's key


class _FormParser(MultiPartParser):
    """Starlette's multipart parser, which also calls ``before_file`` with the text fields read so
    far once the file part's headers have arrived, before any of the file is read."""

    def __init__(self, request: Request, stream: AsyncGenerator[bytes], before_file: FieldsCheck | None) -> None:
        super().__init__(request.headers, stream, max_files=1, max_fields=MAX_FORM_FIELDS)
        self.before_file = before_file

    def on_headers_finished(self) -> None:
        super().on_headers_finished()
        if self.before_file is not None and self._current_part.file is not None:
            self.before_file({name: value for name, value in self.items if isinstance(value, str)})


class UploadSlots:
    """The file uploads being received at once, at most ``limit`` (MT_MAX_UPLOADS). While it
    arrives, an upload is spooled by Starlette's parser (its first MiB in memory, the rest, up to
    MT_MAX_FILE_BYTES, in the temporary directory) and holds its connection: without a bound, slow
    concurrent uploads fill the disk, and a pod past its ``/tmp`` volume's limit is evicted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.receiving = 0
        self.by_key: Counter[str] = Counter()

    @property
    def key_share(self) -> int:
        """The slots one key may hold: a ``KEY_SHARE_OF_UPLOADS``-th of them, at least one."""
        return max(1, self.limit // KEY_SHARE_OF_UPLOADS)

    @contextmanager
    def slot(self, key: str | None) -> Iterator[None]:
        """Held while an upload is received and spooled; refused (429) when none is free, or when
        ``key`` (None: the service has no keys) holds its share. Freed on every way out: the form
        read, refused (413, 408, malformed) or its client gone."""
        if self.receiving >= self.limit:
            raise Overloaded(
                f"{self.limit} file uploads are being received (MT_MAX_UPLOADS): try again shortly",
                retry_after_s=UPLOAD_RETRY_AFTER_S,
            )
        if key is not None and self.by_key[key] >= self.key_share:
            raise Overloaded(
                f"{self.key_share} of this key's file uploads are being received, a key's share of MT_MAX_UPLOADS: "
                "try again shortly",
                retry_after_s=UPLOAD_RETRY_AFTER_S,
            )
        self.receiving += 1
        if key is not None:
            self.by_key[key] += 1
        try:
            yield
        finally:
            self.receiving -= 1
            if key is not None:
                self.by_key[key] -= 1
                if not self.by_key[key]:
                    del self.by_key[key]


async def _form(
    request: Request, *, key: str | None = None, before_file: FieldsCheck | None = None
) -> tuple[dict[str, Any], str]:
    """The multipart form's text fields, the uploaded file's bytes as ``file``, and its name.
    ``key``: the upload's, checked from its headers; else ``before_file`` checks it on the fields
    that come before the file (and may refuse the request on them), and gives it. An upload slot
    is held while the file arrives, within its key's share where the service has keys."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "multipart/form-data":
        raise InvalidRequest(f"unsupported content type {content_type or 'none'!r}: send a multipart/form-data form")
    uploads: UploadSlots = request.app.state.uploads
    settings = (await get_runtime(request)).settings
    keyed = settings.keys_required
    with ExitStack() as held:
        if before_file is None:  # the key was checked from the headers: the slot before any of the body
            held.enter_context(uploads.slot(key if keyed else None))
            taking = None
        else:  # a key the form may carry: the slot once it is checked, as the file part begins

            def taking(fields: dict[str, str]) -> None:
                checked_key = before_file(fields)
                held.enter_context(uploads.slot(checked_key if keyed else None))

        try:  # the slot is given back once the upload's spool is deleted
            async with asyncio.timeout(settings.upload_timeout_s):
                fields, filename = await _read_form(request, taking)
        except TimeoutError:
            raise RequestTimeout(
                f"the upload was not received within {settings.upload_timeout_s:g} s (MT_UPLOAD_TIMEOUT_S)"
            ) from None
    if "file" in fields and not filename:
        raise InvalidRequest("file: must be a file upload with a file name, whose extension names its format")
    return fields, filename


async def _read_form(request: Request, before_file: FieldsCheck | None) -> tuple[dict[str, Any], str]:
    try:
        async with aclosing(request.stream()) as stream:
            form = await _FormParser(request, stream, before_file).parse()
    except MultiPartException as exc:
        raise InvalidRequest(f"malformed form body: {exc.message}") from None
    except HTTPException as exc:
        raise form_error(exc) from None
    filename = ""
    try:
        fields: dict[str, Any] = {key: value for key, value in form.multi_items() if isinstance(value, str)}
        upload = form.get("file")
        if isinstance(upload, UploadFile):
            fields["file"] = await upload.read()
            filename = _uploaded_name(upload.filename or "")
    finally:
        await form.close()  # deletes the upload's spooled temporary file
    return fields, filename


_FORM_NAME_ESCAPES = {"%22": '"', "%0D": "\r", "%0A": "\n"}


def _uploaded_name(sent: str) -> str:
    """The name of an uploaded file as its client meant it: browsers, curl and httpx write a name's
    ``"``, CR and LF as ``%22``, ``%0D`` and ``%0A`` (HTML's multipart/form-data encoding), which
    the multipart parser leaves as they are. The name only: a client may send a path (a Windows
    one, even)."""
    for escaped, char in _FORM_NAME_ESCAPES.items():
        sent = sent.replace(escaped, char)
    return PurePosixPath(sent.replace("\\", "/")).name


def _key_check(runtime: Runtime, header_key: str | None) -> FieldsCheck:
    """LibreTranslate's key check, made when the file part begins: its ``api_key`` field if it came
    before the file, else the ``Authorization`` header."""

    def check(fields: dict[str, str]) -> str | None:
        key = fields.get("api_key") or header_key
        if runtime.settings.keys_required and not key:
            raise Unauthorized(
                "an API key is required: as Authorization: Bearer <key>, or as the api_key field before the file"
            )
        # Called as the form is parsed, where the database cannot be awaited: a managed key this
        # replica has not read yet holds a slot of its own share while its file arrives, and is
        # read before anything is translated.
        runtime.access.check(key, unread=True)
        return key

    return check


def _download_url(request: Request, runtime: Runtime, name: str) -> str:
    """Where to download a stored file: under MT_PUBLIC_URL, else an absolute path under
    MT_ROOT_PATH. Never from the request's Host or X-Forwarded-* headers, which the client chooses:
    a link built from them could point the user of a shared link anywhere."""
    settings = runtime.settings
    return (settings.public_url or settings.root_path) + request.app.url_path_for("download_file", name=name)


def _store(request: Request) -> FileStore:
    store: FileStore = request.app.state.files
    return store


def attachment(filename: str) -> str:
    """Content-Disposition for a download named ``filename`` (RFC 6266): as a quoted string where
    that holds it as it is, else in ``filename*`` (RFC 8187's UTF-8 percent-encoding) after an
    ASCII ``filename`` for the clients that read only that one (RFC 6266, appendix D)."""
    quoted = urllib.parse.quote(filename, safe="")
    if quoted == filename:
        return f'attachment; filename="{filename}"'
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quoted}"
