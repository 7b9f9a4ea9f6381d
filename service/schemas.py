"""Request and response bodies of the HTTP API (they define the OpenAPI schema at /docs).

Validation that needs no settings happens here and yields 422; limits that come from settings
(text count, characters: 413), the language pair (400) and options that depend on the model's
defaults are checked by ``Runtime.translate``. Their JSON schemas carry placeholders for what only
the running service knows (its languages, pairs and limits), which ``service.openapi`` fills in.
"""

from __future__ import annotations

import codecs
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from engine.api import TermUse, TranslationOptions, TranslationResult
from engine.bundle import ModelCard
from engine.glossary import Term
from engine.language_id import Detection
from service.errors import ERROR_TYPES, InvalidRequest, describe_validation
from service.glossaries import MAX_ENTRIES, MAX_TERM_CHARS
from service.identification import Refused

MAX_BEAM_SIZE = 16  # beyond this, cost grows with no quality gain for models of this size
MAX_OUTPUT_TOKENS = 1024
# The shortest deadline a request may set (shorter: 422). The heaviest request the schema allows
# (16 beams and hypotheses, alignments, the longest output) takes a tenth of a second or more even
# for a tiny model on an idle CPU: a shorter deadline would be missed for no fault of the service,
# and a 504 must mean that it was too slow or too busy.
MIN_TIMEOUT_S = 1.0

# Placeholders in the JSON schemas, replaced in each service's OpenAPI document (``service.openapi``).
SERVED_LANGUAGES = "x-served-languages"  # "source" or "target": the codes served on that side
LANGUAGE_PAIR = "x-language-pair"  # [source field, target field] of an object: only served pairs
SAME_LANGUAGE = "x-same-language"  # beside LANGUAGE_PAIR: a language into itself is served too (unchanged)
SETTING_LIMITS = "x-setting-limits"  # {JSON schema keyword: Settings field}: the configured limit
COMPONENT_REF = "#/components/schemas/{model}"  # where a schema's $defs go in the document

# The translation routes read their bodies and keys themselves (see ``validated``); these document
# both in the OpenAPI schema, where FastAPI would otherwise have derived them from the parameters.
BEARER_SCHEME = "APIKey"
BEARER_AUTH: dict[str, Any] = {"security": [{BEARER_SCHEME: []}]}

Model = TypeVar("Model", bound=BaseModel)


def json_body(model: type[BaseModel], *form_types: str) -> dict[str, Any]:
    """``openapi_extra`` for a route that reads a ``model`` body itself: JSON, and the ``form_types``
    (a form's fields are strings: never null). The models it refers to go to the document's
    components, as an ``embedded_schema``'s."""
    schema = model.model_json_schema(ref_template=COMPONENT_REF)
    content = {"application/json": {"schema": schema}}
    content.update({media_type: {"schema": _without_null(schema)} for media_type in form_types})
    return {"requestBody": {"required": True, "content": content}}


def form_body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` for a route that reads a multipart ``model`` body itself (a file upload)."""
    content = {"multipart/form-data": {"schema": _without_null(model.model_json_schema())}}
    return {"requestBody": {"required": True, "content": content}}


def _without_null(schema: Any) -> Any:
    """``schema`` with every ``{"type": "null"}`` alternative taken out."""
    if isinstance(schema, list):
        return [_without_null(item) for item in schema if item != {"type": "null"}]
    if not isinstance(schema, dict):
        return schema
    cleaned = {key: _without_null(value) for key, value in schema.items()}
    if "anyOf" in cleaned and len(cleaned["anyOf"]) == 1:
        cleaned.update(cleaned.pop("anyOf")[0])
    if cleaned.get("default", ...) is None:  # an omitted field is what null meant
        del cleaned["default"]
    return cleaned


def embedded_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema, to write into the OpenAPI document by hand (where FastAPI would not
    place it: an event's data, an error body of a route that streams). The models it refers to stay
    in its ``$defs``, which ``service.openapi`` moves to the document's components, where its
    references point."""
    return model.model_json_schema(ref_template=COMPONENT_REF, mode="serialization")


def validated(model: type[Model], data: bytes | dict[str, Any]) -> Model:
    """A JSON body (bytes: parsed and validated in one pass) or a parsed form as ``model``; any
    problem is an ``InvalidRequest`` (422). A JSON body's content type is not checked.

    The models are strict, as their JSON schemas are (``false`` is no integer, ``"1"`` no number),
    but a form's values are all strings: they are converted. A JSON body may begin with a UTF-8 byte
    order mark, which Windows tools write and RFC 8259 lets a parser ignore (as ``json.loads`` does
    on the LibreTranslate and DeepL routes)."""
    try:
        if isinstance(data, bytes):
            return model.model_validate_json(data.removeprefix(codecs.BOM_UTF8))
        return model.model_validate(data, strict=False)
    except ValidationError as e:
        raise InvalidRequest(describe_validation(e.errors(include_url=False))) from None


def _text_or_texts(value: Any) -> Any:
    """A string or a non-empty list of strings, all valid Unicode, checked before the union so that
    a wrong type gets one clear message instead of one per union member."""
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("must be a string or a non-empty list of strings")
    for i, text in enumerate(texts):
        _check_unicode(text, f"text {i}")
    return value


def _one_text(value: Any) -> Any:
    """A string of valid Unicode (anything else is left to the strict ``str`` to refuse)."""
    if isinstance(value, str):
        _check_unicode(value, "text")
    return value


def _check_unicode(text: str, name: str) -> None:
    # JSON may carry lone surrogates ("\ud800"): not text, and impossible to tokenize or encode.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{name}: invalid Unicode at position {e.start} (lone surrogate)") from None


def _integral(value: Any) -> Any:
    """An integral number as an integer: JSON Schema's ``integer`` includes 2.0, a strict int does not."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# After an int's constraints in its ``Annotated``: placed before them, it hides them from the JSON schema.
INTEGRAL = BeforeValidator(_integral)
_Text = Annotated[str, Field(json_schema_extra={SETTING_LIMITS: {"maxLength": "max_chars"}})]
_Texts = Annotated[list[_Text], Field(min_length=1, json_schema_extra={SETTING_LIMITS: {"maxItems": "max_texts"}})]
TextOrTexts = Annotated[_Text | _Texts, BeforeValidator(_text_or_texts)]
OneText = Annotated[_Text, BeforeValidator(_one_text)]
# A served code (an enum in the OpenAPI document); the service also takes the models' own codes in any case.
SourceLanguage = Annotated[str, Field(min_length=1, max_length=35, json_schema_extra={SERVED_LANGUAGES: "source"})]
TargetLanguage = Annotated[str, Field(min_length=1, max_length=35, json_schema_extra={SERVED_LANGUAGES: "target"})]
OTHER_LANGUAGE_NAMES = "The model's own codes (see /v1/models) and any letter case are accepted as well."


class GlossaryEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    source: str = Field(
        min_length=1,
        max_length=MAX_TERM_CHARS,
        description="The source term: whole words (runs of letters and digits; any other character but a space "
        "is a word of its own), at most 16.",
    )
    target: str = Field(min_length=1, max_length=MAX_TERM_CHARS, description="What the translation must use.")
    case_sensitive: bool = Field(False, description="Match the source term only in this letter case.")

    def term(self) -> Term:
        return Term(self.source, self.target, self.case_sensitive)

    @classmethod
    def of(cls, term: Term) -> GlossaryEntry:
        return cls(source=term.source, target=term.target, case_sensitive=term.case_sensitive)


# Entries sent with a request are parsed, checked and indexed in the HTTP process with every
# request: 1,000 add about 10 ms to it, 10,000 about 145 ms (benchmarks/RESULTS.md, section 17).
MAX_INLINE_ENTRIES = 1_000
GlossaryEntries = Annotated[
    list[GlossaryEntry],
    Field(
        min_length=1,
        max_length=MAX_ENTRIES,
        description=f"At most {MAX_ENTRIES:,} entries, no source term twice as it matches (case-folded unless "
        'case-sensitive: "Dog" and "dog" are one term): else 422 invalid_glossary.',
    ),
]


class InlineGlossary(BaseModel):
    """A glossary for one request, for whatever languages it translates."""

    model_config = ConfigDict(extra="forbid", strict=True)

    entries: Annotated[list[GlossaryEntry], Field(min_length=1, max_length=MAX_INLINE_ENTRIES)] = Field(
        description=f"At most {MAX_INLINE_ENTRIES:,} entries (store a larger glossary: it is checked and indexed "
        "once, not with every request), no source term twice as it matches: else 422."
    )


class TermOut(BaseModel):
    """A glossary term a text says, and where its translation uses the target term."""

    source: str
    target: str
    source_span: tuple[int, int] | None = Field(
        description="[start, end) of the term in the text, in characters; null for HTML and XML."
    )
    target_span: tuple[int, int] | None = Field(
        description="[start, end) of the target term in the translation; null when it is not there."
    )
    used: bool = Field(description="Whether the translation uses the target term (target_span is not null).")

    @classmethod
    def of(cls, use: TermUse, source_offset: int = 0, target_offset: int = 0) -> TermOut:
        """``use``, its spans moved by the offsets (of a sentence in its text, for instance)."""
        return cls(
            source=use.source,
            target=use.target,
            source_span=_moved(use.source_span, source_offset),
            target_span=_moved(use.target_span, target_offset),
            used=use.used,
        )


def _moved(span: tuple[int, int] | None, offset: int) -> tuple[int, int] | None:
    return None if span is None else (span[0] + offset, span[1] + offset)


def _hypotheses_within_the_beam() -> list[dict[str, Any]]:
    """JSON schema alternatives that say ``num_hypotheses <= beam_size`` when ``beam_size`` is given."""
    return [
        {"properties": {"beam_size": {"type": "null"}}},
        *(
            {"properties": {"beam_size": {"const": b}, "num_hypotheses": {"maximum": b}}}
            for b in range(1, MAX_BEAM_SIZE)
        ),
        {"properties": {"beam_size": {"const": MAX_BEAM_SIZE}}},
    ]


class TranslateRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [{"text": "A dog runs on the grass.", "source_lang": "en", "target_lang": "de"}],
            LANGUAGE_PAIR: ["source_lang", "target_lang"],
            "anyOf": _hypotheses_within_the_beam(),
        },
    )

    text: TextOrTexts = Field(
        description="One text or a list of texts: at most MT_MAX_TEXTS, and MT_MAX_CHARS characters in all (413). "
        "Lines and sentences are kept."
    )
    source_lang: SourceLanguage | None = Field(
        None, description=f'Source language; omitted or "auto" = identified per text. {OTHER_LANGUAGE_NAMES}'
    )
    target_lang: TargetLanguage = Field(description=f"Target language. {OTHER_LANGUAGE_NAMES}")
    beam_size: Annotated[int, Field(ge=1, le=MAX_BEAM_SIZE), INTEGRAL] | None = Field(
        None, description="1 = greedy; omitted = model default."
    )
    num_hypotheses: Annotated[int, Field(ge=1, le=MAX_BEAM_SIZE), INTEGRAL] = Field(
        1, description="Hypotheses to return (<= beam_size; an omitted beam widens to them)."
    )
    length_penalty: float | None = Field(None, ge=0, le=10, allow_inf_nan=False, description="alpha in score/n^alpha.")
    max_length: Annotated[int, Field(ge=1, le=MAX_OUTPUT_TOKENS), INTEGRAL] | None = Field(
        None, description="Cap on generated tokens."
    )
    max_consecutive_repeats: Annotated[int, Field(ge=0, le=MAX_OUTPUT_TOKENS), INTEGRAL] | None = Field(
        None,
        description="A span of up to 8 generated pieces occurs at most this many times in a row, which ends "
        "runaway loops; 0 = no limit; omitted = model default.",
    )
    format: Literal["text", "html", "xml"] = Field(
        "text",
        description="html, xml: each text is markup, translated with its tags in place (code, pre, script, "
        'style, translate="no" and attributes other than alt and title kept as written); malformed markup is a 422.',
    )
    return_scores: bool = False
    return_alignments: bool = False
    shortlist: bool | None = Field(
        None,
        description="Score only the target pieces the texts make likely (the model's vocabulary shortlist, where "
        "it has one): faster; omitted = the model's default, on only where it kept BLEU within 0.2 of the full "
        "vocabulary.",
    )
    glossary: Annotated[str, Field(min_length=1, max_length=64)] | InlineGlossary | None = Field(
        None,
        description="Terms the translation must use wherever a text says their source: the id of a glossary "
        "(/v1/glossaries: 404 if there is none; its languages must be the request's, else 400 glossary_mismatch; "
        "with the source identified, a text in another language than the glossary's is translated without it), "
        'or {"entries": [...]} for this request alone. Each translation then reports its glossary_terms.',
    )
    timeout_s: float | None = Field(
        None,
        ge=MIN_TIMEOUT_S,
        allow_inf_nan=False,
        description=f"Deadline in seconds, at least {MIN_TIMEOUT_S:g} (422); capped at MT_REQUEST_TIMEOUT_S (504).",
    )

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else self.text

    def options(self) -> TranslationOptions:
        try:
            return TranslationOptions(
                beam_size=self.beam_size,
                num_hypotheses=self.num_hypotheses,
                length_penalty=self.length_penalty,
                max_length=self.max_length,
                max_consecutive_repeats=self.max_consecutive_repeats,
                return_alignments=self.return_alignments,
                format=self.format,
                shortlist=self.shortlist,
            )
        except ValueError as e:  # the engine's checks across fields (num_hypotheses <= beam_size)
            raise InvalidRequest(str(e)) from None


class TranslateStreamRequest(TranslateRequest):
    """``POST /v1/translate/stream``: /v1/translate's body for one text."""

    text: OneText = Field(
        description="The text: at most MT_MAX_CHARS characters (413). It is translated sentence by sentence; "
        "lines and whitespace are kept."
    )
    format: Literal["text"] = Field(
        "text", description="Plain text only: HTML and XML are translated whole, by /v1/translate (422)."
    )


class Scored(BaseModel):
    text: str
    score: float = Field(description="Length-normalized log-probability, the ranking criterion.")


class AlignmentOut(BaseModel):
    source_tokens: list[str]
    target_tokens: list[str]
    weights: list[list[float]] = Field(description="Target tokens x source tokens; rows sum to 1.")
    source_words: list[str]
    target_words: list[str]
    word_alignment: list[tuple[int, int]] = Field(description="[source word index, target word index] pairs.")


class DetectedLanguage(BaseModel):
    language: str = Field(description="ISO 639-1 code")
    confidence: float = Field(ge=0, le=1)
    guessed: bool | None = Field(
        None,
        description="Present and true when the text was too short or too unusual to identify: it was translated "
        "from the likeliest language served into target_lang (name source_lang if it is another).",
    )

    @classmethod
    def of(cls, detection: Detection | None) -> DetectedLanguage | None:
        """What a response says of ``detection``: nothing when no language was identified."""
        if detection is None or detection.language is None:
            return None
        guessed = True if detection.guessed else None
        return cls(language=detection.language, confidence=round(detection.confidence, 4), guessed=guessed)


class TextOut(BaseModel):
    """What every answer says of a translated text."""

    text: str
    model: str | None = Field(
        None, description='Model that translated it ("a:1+b:2" through a pivot); absent when passed through.'
    )
    detected_language: DetectedLanguage | None = Field(None, description="When the source language was identified.")
    truncated: bool | None = Field(None, description="Present and true when an over-long sentence was cut.")


class TextError(BaseModel):
    """Why one text of a request was not translated while others were."""

    type: Literal["unsupported_language"]
    message: str
    detected_language: str | None = Field(description="Its language, as identified; null when none was.")

    @classmethod
    def of(cls, detection: Detection | None) -> TextError | None:
        if not isinstance(detection, Refused):
            return None
        return cls(type="unsupported_language", message=detection.message, detected_language=detection.language)


class TranslationOut(TextOut):
    score: float | None = None
    alternatives: list[Scored] | None = None
    alignment: AlignmentOut | None = None
    glossary_terms: list[TermOut] | None = Field(
        None,
        description="With a glossary: the terms the text says, in order, and where the translation uses them.",
    )
    error: TextError | None = Field(
        None,
        description="Present when this text was refused and others of the request were not (source_lang omitted or "
        '"auto"): it is identified with confidence as a language no model translates into target_lang. The text '
        "comes back unchanged, without model. When every text is refused, the request is a 400 instead.",
    )

    @classmethod
    def from_result(
        cls,
        result: TranslationResult,
        request: TranslateRequest,
        model: str | None,
        detection: Detection | None,
        **fields: Any,
    ) -> Self:
        """``result`` as ``request`` asked for it; ``fields``: those of a subclass."""
        best, *others = result.hypotheses or [None]
        alignment = result.alignment if request.return_alignments else None
        return cls(
            text=result.text,
            model=model,
            detected_language=DetectedLanguage.of(detection),
            score=best.normalized_score if request.return_scores and best is not None else None,
            alternatives=[Scored(text=h.text, score=h.normalized_score) for h in others] if others else None,
            alignment=AlignmentOut.model_validate(alignment, from_attributes=True) if alignment else None,
            truncated=True if result.truncated else None,
            glossary_terms=[TermOut.of(use) for use in result.terms] if request.glossary is not None else None,
            error=TextError.of(detection),
            **fields,
        )


class TranslateResponse(BaseModel):
    model: str | None = Field(
        None,
        description="name:version of the models that translated, in order of first use; absent when no text "
        "needed a model (each was passed through unchanged).",
    )
    translations: list[TranslationOut]


class StreamSentence(TranslationOut):
    """The data of a ``sentence`` event: one sentence's translation, as /v1/translate gives a text's."""

    index: int = Field(ge=0, description="The sentence's place in the text: 0, 1, 2, ...")
    source: str = Field(description="The sentence, as it is in the text.")
    separator: str = Field(
        description="What comes before the sentence in the text (whitespace and line breaks; for the first, the "
        "text's leading whitespace), to be written before its translation; and a space after a sentence it "
        'touched in the text ("。" and no space) where the target language writes one between sentences.'
    )


class StreamDone(TextOut):
    """The data of the ``done`` event: the whole translation, as /v1/translate gives it for the same text."""

    text: str = Field(
        description="Each sentence event's separator and text, in order, then this event's separator: the whole "
        "translation."
    )
    separator: str = Field(
        description="What comes after the last sentence in the text (its trailing whitespace); all of a text "
        "without sentences."
    )
    sentences: int = Field(ge=0, description="How many sentence events came before.")
    glossary_terms: list[TermOut] | None = Field(
        None, description="With a glossary: every sentence's glossary_terms, their spans in the whole text."
    )


class LanguageOut(BaseModel):
    code: str = Field(description="the code requests use, ISO 639-1 where the language has one")
    model_code: str | None = Field(default=None, description="the model's own code, accepted as well")


class ModelOut(BaseModel):
    id: str = Field(description="the model's name, unique in the repository")
    version: str | None = None
    source_languages: list[LanguageOut] = Field(
        default_factory=list,
        description="every source language is translated into every target language other than itself",
    )
    target_languages: list[LanguageOut] = Field(default_factory=list)
    variant: str | None = Field(None, description="the variant loaded, or that would load")
    provider: str | None = Field(None, description="execution provider, while loaded")
    quality: dict[str, Any] = Field(default_factory=dict, description="test set -> BLEU/chrF of the variant")
    loaded: bool
    memory_mb: float | None = Field(None, description="resident memory the model added when it loaded")
    error: str | None = Field(None, description="why the model cannot serve")
    card: ModelCard | None = Field(None, description="what it was trained on and where it is reliable")


class PairOut(BaseModel):
    source: str
    target: str
    models: list[str] = Field(description="one model, or two chained through a pivot language")


class ModelsResponse(BaseModel):
    models: list[ModelOut]
    pairs: list[PairOut] = Field(description="every pair served")


class DetectRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [{"text": "Ein Hund läuft."}]}
    )

    text: str = Field(min_length=1, max_length=20_000)


class DetectCandidate(BaseModel):
    language: str
    confidence: float = Field(ge=0, le=1)


class DetectResponse(BaseModel):
    language: str | None = Field(
        description="ISO 639-1 code (or ISO 639-3, for a language outside MT_DETECT_LANGUAGES that has none); "
        "null when the text has no letters or the identifier knows nothing of it (a short text it has no n-gram of)"
    )
    confidence: float = Field(ge=0, le=1)
    candidates: list[DetectCandidate] = Field(description="best first")


class ErrorDetail(BaseModel):
    type: str = Field(json_schema_extra={"enum": list(ERROR_TYPES)})
    message: str
    supported_pairs: list[str] | None = Field(None, description="unsupported_language: the pairs served, as en-de")
    detected_language: str | None = Field(
        None, description="unsupported_language of an identified text: its language; null when none was identified"
    )
    text_index: int | None = Field(None, description="malformed_markup: which text of the request")
    line: int | None = Field(None, description="malformed_markup: where in that text (from 1)")
    column: int | None = Field(None, description="malformed_markup: where in that line (from 1)")
    entry: int | None = Field(
        None, description="invalid_glossary: the line or row of entries_text that is wrong (from 1)"
    )
    # payload_too_large by what the request would cost (its beams, its alignments), not by its size
    setting: str | None = Field(
        None, description="payload_too_large by cost: the setting that limits it (MT_MAX_BEAM_TOKENS, ...)"
    )
    limit: int | None = Field(None, description="payload_too_large by cost: that setting's value")
    requested: int | None = Field(None, description="payload_too_large by cost: what the request would take")


class ErrorResponse(BaseModel):
    error: ErrorDetail
