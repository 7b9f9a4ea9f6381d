"""``POST /v1/translate/stream``: one text translated sentence by sentence, as server-sent events.

The body is /v1/translate's for one text. Everything about the request is checked before the stream
starts, and the response starts once the first sentence is translated, so that what fails before
that is an ordinary HTTP error (401, 400, 413, 422; 429, 503, 504). Then come, in the text's order,
``event: sentence`` for each sentence as soon as it and all before it are translated
(``StreamSentence``), and ``event: done`` with the whole translation (``StreamDone``), or
``event: error`` with the service's error body where a sentence fails (429, 504, 500), after which
the stream ends. The sentences are those /v1/translate translates apart (``split_units``: a run of
emoji or other symbols at a sentence's edge is one of its own), and each event's ``separator`` and
``text``, then the done event's ``separator``, make up the done event's ``text``: what /v1/translate
answers for the same text. A client that disconnects
cancels the sentences not yet translated (``SentenceStream.close``). With a glossary, each sentence
event reports its terms with their spans in the sentence and its translation, and the done event
all of them, with their spans in the whole text and translation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel

from engine.bundle import Language
from engine.language_id import Detection
from engine.languages import word_separator
from engine.segmenter import Segment, SegmentedText, split_units
from service.errors import error_response
from service.metrics import Metrics
from service.routes.common import (
    authorized,
    bearer_key,
    get_runtime,
    json_error_responses,
    translation_job,
    unless_disconnected,
)
from service.routes.glossaries import NOT_FOUND, request_glossary
from service.schemas import (
    BEARER_AUTH,
    DetectedLanguage,
    ErrorResponse,
    StreamDone,
    StreamSentence,
    TermOut,
    TranslateStreamRequest,
    embedded_schema,
    json_body,
    validated,
)
from service.sentence_stream import Part, SentenceStream

router = APIRouter()

# The events, by name, and the JSON their data holds.
EVENTS: dict[str, type[BaseModel]] = {"sentence": StreamSentence, "done": StreamDone, "error": ErrorResponse}


def _event_schema(name: str, data: type[BaseModel]) -> dict[str, Any]:
    """One event of the stream in the OpenAPI document (OpenAPI 3.2's ``itemSchema``, as FastAPI writes it)."""
    content = {"contentMediaType": "application/json", "contentSchema": embedded_schema(data)}
    return {"properties": {"event": {"const": name}, "data": content}, "required": ["event", "data"]}


STREAM = {
    "description": "Server-sent events: `sentence` for each sentence, in order, then `done`; or `error` where one "
    "fails, after which the stream ends.",
    "content": {"text/event-stream": {"itemSchema": {"oneOf": [_event_schema(*event) for event in EVENTS.items()]}}},
}


@dataclass(frozen=True)
class _Started:
    body: TranslateStreamRequest
    detection: Detection | None  # of the whole text, when the source language was identified
    sentences: SentenceStream
    metrics: Metrics
    word_separator: str  # of the target language: between two translated sentences that touched in the text


class _Joiner:
    """What to write before each sentence's translation so that they join as /v1/translate joins
    a text's sentences (``SegmentedText.join``): the sentence's separator, and a word separator
    where it touched the sentence before ("A dog.。A cat." into German: "Ein Hund. Eine Katze.").
    Each sentence is joined to the one before as the whole text would be, by the same code."""

    def __init__(self, word_separator: str) -> None:
        self._word_separator = word_separator
        self._previous: Part | None = None
        self._tail = ""  # the last character written before the previous sentence's translation

    def separator(self, part: Part) -> str:
        previous = self._previous
        written = part.separator
        if previous is not None:
            pair = SegmentedText([Segment(previous.source), Segment(part.source)], [self._tail, part.separator, ""])
            joined, starts = pair.join_spans([previous.result.text, part.result.text], self._word_separator)
            written = joined[starts[0] + len(previous.result.text) : starts[1]]
            self._tail = (self._tail + previous.result.text + written)[-1:]
        else:
            self._tail = written[-1:]
        self._previous = part
        return written


async def _started(request: Request) -> AsyncIterator[_Started]:
    """The checked request, its first sentence translated; once the response has ended, what is left
    is cancelled. A dependency: what it raises is answered as an HTTP error."""
    runtime = await get_runtime(request)
    caller = await authorized(request, bearer_key(request))  # before the body: its errors are for those with a key
    body = validated(TranslateStreamRequest, await request.body())
    glossary = await request_glossary(request, body.glossary)
    plan = runtime.plan(replace(translation_job(body, request), glossary=glossary))
    [route] = plan.routes
    separator = " " if route is None else word_separator(Language(code=route.target))
    settings = runtime.settings
    # The batcher starts a batch that is not full once its oldest text has waited MT_MAX_WAIT_MS.
    first_batch_s = 2 * settings.max_wait_ms / 1000 + 0.005
    sentences = SentenceStream(
        runtime, plan, split_units(body.text), window=settings.max_texts, first_batch_s=first_batch_s
    )
    async with runtime.access.metered(caller, len(body.text)):
        try:
            await unless_disconnected(request, sentences.start())
            detection = plan.detections[0] if plan.detections else None
            yield _Started(body, detection, sentences, runtime.metrics, separator)
        finally:
            await sentences.close()


@router.post(
    "/v1/translate/stream",
    response_class=EventSourceResponse,
    responses={
        200: STREAM,
        **json_error_responses(400, 401, 403, 413, 422, 429, 503, 504),
        404: {**json_error_responses(404)[404], "description": NOT_FOUND},
    },
    tags=["translation"],
    openapi_extra={**json_body(TranslateStreamRequest), **BEARER_AUTH},
)
async def translate_stream(started: Annotated[_Started, Depends(_started)]) -> AsyncIterator[ServerSentEvent]:
    """Translate one text sentence by sentence, as server-sent events: `sentence` for each, in order
    (its `separator` and `text`, then the next's, ...), then `done` with the whole translation, which
    /v1/translate would answer; or `error` where a sentence fails. Every check is made before the
    stream starts: a request refused is answered with an HTTP error, as /v1/translate's is."""
    parts: list[tuple[Part, str]] = []  # each sentence, and what was written before its translation
    joiner = _Joiner(started.word_separator)
    try:
        async for part in started.sentences:
            parts.append((part, joiner.separator(part)))
            sentence = StreamSentence.from_result(
                part.result,
                started.body,
                part.model,
                started.detection,
                index=part.index,
                source=part.source,
                separator=parts[-1][1],
            )
            yield _event("sentence", sentence)
    except Exception as exc:  # ends the stream as an error response would end the request
        response, error_type = error_response(exc)
        started.metrics.errors.labels(error_type).inc()
        yield ServerSentEvent(event="error", raw_data=bytes(response.body).decode())
        return
    terms = _terms(parts) if started.body.glossary is not None else None
    yield _event("done", _done(parts, started.sentences.trailing, started.detection, terms))


def _event(name: str, data: BaseModel) -> ServerSentEvent:
    return ServerSentEvent(event=name, raw_data=data.model_dump_json(exclude_none=True))


def _done(
    parts: list[tuple[Part, str]], trailing: str, detection: Detection | None, terms: list[TermOut] | None
) -> StreamDone:
    return StreamDone(
        text="".join(written + part.result.text for part, written in parts) + trailing,
        separator=trailing,
        sentences=len(parts),
        model=next((part.model for part, _ in parts if part.model), None),
        detected_language=DetectedLanguage.of(detection),
        truncated=True if any(part.result.truncated for part, _ in parts) else None,
        glossary_terms=terms,
    )


def _terms(parts: list[tuple[Part, str]]) -> list[TermOut]:
    """Every sentence's glossary terms, with their spans in the whole text and translation."""
    terms = []
    source_at = target_at = 0
    for part, written in parts:
        source_at += len(part.separator)
        target_at += len(written)
        terms += [TermOut.of(use, source_at, target_at) for use in part.result.terms]
        source_at += len(part.source)
        target_at += len(part.result.text)
    return terms
