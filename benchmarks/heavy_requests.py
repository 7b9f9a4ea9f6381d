"""The heaviest request of each of the service's features that its limits admit, for
``benchmarks.noisy_neighbour``.

Every size comes from the service's settings as the service reads them (``Limits.of``) and from
the model it routes en->de to (its tokenizer and default beam), so that the requests follow the
limits wherever they are set. Texts are sentences of the corpus drawn at random, so that every
request is new and the translation cache never answers it. The kinds (``KINDS``), each a cycle
of requests a heavy client sends in turn:

- ``text``: one text of MT_MAX_CHARS - 100 characters that the model cannot end early (a random
  prefix, then one letter repeated; refused at the default limits by MT_MAX_BEAM_TOKENS), then
  MT_MAX_TEXTS texts of up to 300 characters;
- ``document``: a .docx, a .md and a .srt for ``/v1/translate_file`` at MT_MAX_FILE_BYTES (a .docx's
  parts, decompressed, at MT_MAX_DOCUMENT_BYTES), full of paragraphs (or cues) of MT_MAX_CHARS /
  MT_MAX_TEXTS characters: every chunk the service sends through its queue is full;
- ``html``: one ``format: "html"`` text of MT_MAX_CHARS characters, one paragraph in which every
  word is an inline element of its own (``<b>`` and ``<i>`` in turn);
- ``stream``: ``/v1/translate/stream`` with one text of MT_MAX_CHARS characters;
- ``glossary``: MT_MAX_TEXTS texts of MT_MAX_CHARS / MT_MAX_TEXTS characters naming a stored
  glossary of ``MAX_ENTRIES`` entries in which every word of the corpus, then its most frequent
  runs of two and three words, is a source term (filler terms beyond), so that every word of every
  sentence is a term; each target term is its source spelled backwards, which the model never says
  by itself;
- ``alignments``: ``return_alignments`` on the fewest texts of equal length that fill MT_MAX_CHARS
  while their estimated weights stay within MT_MAX_ALIGNMENT_CELLS (and their cost within
  MT_MAX_BEAM_TOKENS), counted with the model's tokenizer as the service counts them.
"""

from __future__ import annotations

import io
import itertools
import os
import random
import re
import string
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from unittest import mock

from benchmarks.memory import CONTENT_TYPES, PACKAGE_RELATIONSHIPS, WORD
from engine.bundle import load_bundle
from engine.documents.fragments import escape
from engine.repository import Router, discover, single
from engine.tokenizer import Tokenizer
from service.glossaries import MAX_ENTRIES
from service.launcher import service_env
from service.settings import Settings

PAIR = {"source_lang": "en", "target_lang": "de"}
LONG_TEXT_SHORTFALL = 100  # the long text stays this far under MT_MAX_CHARS
MANY_TEXT_CHARS = 300  # the text kind's texts, as section 15 measured them
INLINE_TAGS = ("b", "i")
TERM_WORDS = (1, 2, 3)  # runs of words made source terms, single words first: each word is a term
_WORD = re.compile(r"\w+")  # a word as glossary matching reads one (engine.glossary)
DOCX_HEAD = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{WORD}"><w:body>'
DOCX_TAIL = "</w:body></w:document>"


@dataclass(frozen=True)
class Request:
    """One request: a JSON body, or a file with form fields; ``chars`` of source text."""

    name: str  # which of its kind's requests
    path: str
    chars: int
    note: str  # what it holds, for the report
    json: dict | None = None
    file: tuple[str, bytes] | None = None
    form: dict[str, str] | None = None


@dataclass(frozen=True)
class Limits:
    """The service's limits, and the en->de model's tokenizer and default beam."""

    settings: Settings
    tokenizer: Tokenizer
    beam: int

    @classmethod
    def of(cls, env: Mapping[str, str]) -> Limits:
        """The limits of a service started with the ``MT_*`` ``env`` (``service.launcher``)."""
        with mock.patch.dict(os.environ, service_env(env), clear=True):
            settings = Settings()
        entries = single(settings.model_dir) if settings.model_dir else discover(settings.models_dir)
        [hop, *_] = Router(entries, pivot=settings.pivot).route(PAIR["source_lang"], PAIR["target_lang"]).hops
        entry = next(e for e in entries if e.id == hop.model)
        bundle = load_bundle(entry.path, verify_checksums=False, check_graphs=False)
        return cls(settings, Tokenizer.from_bundle(bundle), bundle.manifest.decoding.beam_size)

    @property
    def paragraph_chars(self) -> int:
        """A paragraph's size such that a full request of them fills both MT_MAX_TEXTS and MT_MAX_CHARS."""
        return self.settings.max_chars // self.settings.max_texts

    def admitted(self, texts: Sequence[str], *, alignments: bool) -> bool:
        """Whether the service's cost estimate (``service.planning.Planner``) admits ``texts``."""
        tokens = [len(self.tokenizer.encode(text)) for text in texts]  # EOS included, as the service counts
        cells = sum((n - 1) ** 2 for n in tokens)
        within_cells = not alignments or cells <= self.settings.max_alignment_cells
        return sum(tokens) * self.beam <= self.settings.max_beam_tokens and within_cells


@dataclass(frozen=True)
class Setup:
    """What the requests are made of: the limits, the corpus, and the stored glossary's id."""

    limits: Limits
    sentences: Sequence[str]
    glossary_id: str | None = None


Builder = Callable[[Setup, random.Random], Request]


def requests(kind: str, setup: Setup, rng: random.Random, start: int = 0) -> Iterator[Request]:
    """A heavy client's requests, without end: its kind's in turn, from the ``start``-th."""
    for build in itertools.islice(itertools.cycle(BUILDERS[kind]), start, None):
        yield build(setup, rng)


def filled(sentences: Sequence[str], rng: random.Random, chars: int) -> str:
    """Sentences drawn at random, joined, until the next would take the text over ``chars``."""
    text = rng.choice(sentences)[:chars]
    while len(longer := f"{text} {rng.choice(sentences)}") <= chars:
        text = longer
    return text


def translate(name: str, texts: str | list[str], note: str, **options: object) -> Request:
    chars = len(texts) if isinstance(texts, str) else sum(map(len, texts))
    return Request(name, "/v1/translate", chars, note, json={**PAIR, "text": texts, **options})


# -- text ----------------------------------------------------------------------------------------


def long_text(setup: Setup, rng: random.Random) -> Request:
    """A sentence the model cannot end early: a random prefix, then one letter repeated, as long as
    MT_MAX_CHARS and the cost estimate admit (a repeated letter is a piece each: at the default limits
    MT_MAX_BEAM_TOKENS is the tighter)."""
    limits = setup.limits
    max_chars = limits.settings.max_chars
    prefix = "".join(rng.choice(string.ascii_lowercase + " ") for _ in range(60))
    text = (prefix + "a" * max_chars)[: max_chars - LONG_TEXT_SHORTFALL]
    admitted, refused = 0, len(text) + 1  # the longest admitted length, by bisection
    while refused - admitted > 1:
        middle = (admitted + refused) // 2
        admitted, refused = (
            (middle, refused) if limits.admitted([text[:middle]], alignments=False) else (admitted, middle)
        )
    text = text[:admitted]
    return translate("long text", text, f"1 text of {len(text):,} characters, one letter repeated")


def many_texts(setup: Setup, rng: random.Random, size: int | None = None, **options: object) -> Request:
    """MT_MAX_TEXTS texts of sentences, each of up to ``size`` characters."""
    settings = setup.limits.settings
    size = size or min(MANY_TEXT_CHARS, settings.max_chars // settings.max_texts)
    texts = [filled(setup.sentences, rng, size) for _ in range(settings.max_texts)]
    note = f"{len(texts)} texts of up to {size:,} characters ({sum(map(len, texts)):,} in all)"
    return translate(f"{len(texts)} texts", texts, note, **options)


# -- documents -----------------------------------------------------------------------------------


def paragraphs(setup: Setup, rng: random.Random, budget: int, render: Callable[[int, str], str]) -> tuple[str, int]:
    """Paragraphs of ``Limits.paragraph_chars``, each rendered with its number, for as long as the
    rendered text stays within ``budget`` bytes and the document within MT_MAX_DOCUMENT_TEXTS and
    MT_MAX_DOCUMENT_CHARS; the text, and the paragraphs' characters."""
    settings = setup.limits.settings
    pieces: list[str] = []
    used = chars = 0
    while True:
        paragraph = filled(setup.sentences, rng, setup.limits.paragraph_chars)
        piece = render(len(pieces) + 1, paragraph)
        over = chars + len(paragraph) > settings.max_document_chars or len(pieces) == settings.max_document_texts
        if over or used + len(piece.encode()) > budget:
            return "".join(pieces), chars
        pieces.append(piece)
        used += len(piece.encode())
        chars += len(paragraph)


def text_file_budget(settings: Settings) -> int:
    """A text file's largest size: MT_MAX_DOCUMENT_BYTES holds it as it is."""
    return min(settings.max_file_bytes, settings.max_document_bytes)


def file_request(name: str, data: bytes, chars: int, paragraph_chars: int, what: str) -> Request:
    note = f"{len(data):,} bytes, {chars:,} characters of {what} of up to {paragraph_chars:,} characters"
    return Request(name, "/v1/translate_file", chars, note, file=(f"heavy{name}", data), form=dict(PAIR))


def markdown_file(setup: Setup, rng: random.Random) -> Request:
    budget = text_file_budget(setup.limits.settings)
    text, chars = paragraphs(setup, rng, budget, lambda _, paragraph: f"{paragraph}\n\n")
    return file_request(".md", text.encode(), chars, setup.limits.paragraph_chars, "paragraphs")


def srt_cue(number: int, text: str) -> str:
    start, end = 2 * number, 2 * number + 1
    return f"{number}\n{srt_time(start)} --> {srt_time(end)}\n{text}\n\n"


def srt_time(seconds: int) -> str:
    return f"{seconds // 3600:02}:{seconds // 60 % 60:02}:{seconds % 60:02},000"


def subtitles_file(setup: Setup, rng: random.Random) -> Request:
    budget = text_file_budget(setup.limits.settings)
    text, chars = paragraphs(setup, rng, budget, srt_cue)
    return file_request(".srt", text.encode(), chars, setup.limits.paragraph_chars, "cues")


def docx_paragraph(_: int, text: str) -> str:
    return f'<w:p><w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>'


def docx_file(setup: Setup, rng: random.Random) -> Request:
    """A .docx whose parts, decompressed, come to MT_MAX_DOCUMENT_BYTES; refused here if its
    compressed size would be over MT_MAX_FILE_BYTES (it is not, by far, at the defaults)."""
    settings = setup.limits.settings
    package = (("[Content_Types].xml", CONTENT_TYPES), ("_rels/.rels", PACKAGE_RELATIONSHIPS))
    fixed = sum(len(part.encode()) for _, part in package) + len(DOCX_HEAD) + len(DOCX_TAIL)
    body, chars = paragraphs(setup, rng, settings.max_document_bytes - fixed, docx_paragraph)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as docx:
        for name, part in package:
            docx.writestr(name, part)
        docx.writestr("word/document.xml", DOCX_HEAD + body + DOCX_TAIL)
    data = out.getvalue()
    if len(data) > settings.max_file_bytes:
        raise ValueError(f".docx of {len(data)} bytes compressed, over MT_MAX_FILE_BYTES ({settings.max_file_bytes})")
    expanded = fixed + len(body.encode())
    request = file_request(".docx", data, chars, setup.limits.paragraph_chars, "paragraphs")
    return replace(request, note=f"{request.note}, {expanded:,} bytes decompressed")


# -- markup, streams, glossaries, alignments -----------------------------------------------------


def html_text(setup: Setup, rng: random.Random) -> Request:
    """One paragraph of MT_MAX_CHARS characters of markup, every word an inline element."""
    max_chars = setup.limits.settings.max_chars - len("<p></p>")
    elements: list[str] = []
    used = -1  # no space before the first
    for word, tag in zip(words(setup.sentences, rng), itertools.cycle(INLINE_TAGS)):
        element = f"<{tag}>{escape(word)}</{tag}>"
        if used + 1 + len(element) > max_chars:
            break
        elements.append(element)
        used += 1 + len(element)
    text = f"<p>{' '.join(elements)}</p>"
    note = f"1 text of {len(text):,} characters: one paragraph of {len(elements):,} inline elements"
    return translate("html", text, note, format="html")


def words(sentences: Sequence[str], rng: random.Random) -> Iterator[str]:
    """The words of sentences drawn at random, without end."""
    while True:
        yield from rng.choice(sentences).split()


def stream_text(setup: Setup, rng: random.Random) -> Request:
    text = filled(setup.sentences, rng, setup.limits.settings.max_chars)
    note = f"1 text of {len(text):,} characters, streamed"
    return Request("stream", "/v1/translate/stream", len(text), note, json={**PAIR, "text": text})


def glossary_texts(setup: Setup, rng: random.Random) -> Request:
    request = many_texts(setup, rng, size=setup.limits.paragraph_chars, glossary=setup.glossary_id)
    return replace(request, name="glossary", note=f"{request.note}, a stored glossary of {MAX_ENTRIES:,} entries")


def glossary_entries(sentences: Sequence[str], size: int = MAX_ENTRIES) -> list[dict[str, str]]:
    """``size`` entries: every word of ``sentences``, then runs of two and three words, the most
    frequent first, as source terms (case-folded: one entry per term as it matches), each spelled
    backwards as its target; filler terms, which no sentence says, make up the rest."""
    said = [_WORD.findall(sentence.casefold()) for sentence in sentences]
    sources: list[str] = []
    for length in TERM_WORDS:
        runs = Counter(" ".join(words[i : i + length]) for words in said for i in range(len(words) - length + 1))
        sources += [run for run, _ in runs.most_common()]
    entries = [{"source": source, "target": source[::-1]} for source in sources[:size]]
    entries += [{"source": f"filler{i}", "target": f"Füller{i}"} for i in range(size - len(entries))]
    return entries


def aligned_texts(setup: Setup, rng: random.Random) -> Request:
    """The fewest texts that fill MT_MAX_CHARS with alignments admitted: the largest request and
    matrices whose estimated weights come closest to MT_MAX_ALIGNMENT_CELLS."""
    limits = setup.limits
    for count in range(1, limits.settings.max_texts + 1):
        size = limits.settings.max_chars // count
        texts = [filled(setup.sentences, rng, size) for _ in range(count)]
        if limits.admitted(texts, alignments=True):
            note = f"{count} texts of up to {size:,} characters ({sum(map(len, texts)):,} in all), alignments"
            return translate("alignments", texts, note, return_alignments=True)
    raise ValueError("no request of MT_MAX_TEXTS texts has its alignments admitted")


BUILDERS: dict[str, tuple[Builder, ...]] = {
    "text": (long_text, many_texts),
    "document": (docx_file, markdown_file, subtitles_file),
    "html": (html_text,),
    "stream": (stream_text,),
    "glossary": (glossary_texts,),
    "alignments": (aligned_texts,),
}
KINDS = tuple(BUILDERS)
