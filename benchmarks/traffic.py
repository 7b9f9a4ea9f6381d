"""What the soak (``benchmarks/soak.py``) sends: every kind of request, built from Multi30K sentences,
and the outcomes that answer each one correctly.

The steady mix, drawn at random by ``Kind.weight``:

- ``translate``: ``POST /v1/translate``, one to four sentences, en→de or de→en; one in ten a document
  (lines of several sentences, split and put back together). ``libretranslate``: ``POST /translate``,
  sometimes with ``alternatives``. Half of both name no source language: a sentence identified as a
  language no model translates from is then refused (400), as the service promises (about 1 in 1,000
  Multi30K sentences, e.g. "A man barbecues chicken on a grill." is taken for Spanish).
- ``alignments`` (``return_alignments``, ``return_scores``), ``n-best`` (``num_hypotheses`` 2–5 at beam
  5), ``detect`` (``POST /v1/detect`` and LibreTranslate's ``POST /detect``).
- ``bad body``: malformed JSON, bytes that are not JSON, wrong types, unknown fields, more hypotheses
  than beams (422; 400 on LibreTranslate's route, as LibreTranslate answers), a pair no model
  serves (400).
- ``oversize``: more texts than ``MT_MAX_TEXTS``, more characters than ``MT_MAX_CHARS``, a body over
  ``MT_MAX_REQUEST_BYTES`` (413; LibreTranslate's route answers too many characters with 400, as
  LibreTranslate does).
- ``timeout``: the shortest deadline the API takes (``timeout_s`` 1 s) on a full batch at the widest
  beam: answered (200) or, where it outlasts the deadline, dropped (504).
- ``disconnect``: the client hangs up halfway through sending its body, right after sending it, or
  while it is being translated; no answer is awaited.

And, apart from the mix, the ``flood``: requests of ``MT_MAX_TEXTS`` sentences for one model, until the
queue (``MT_MAX_QUEUE_SENTENCES``) is full and some are refused (429).

Sentences are taken in corpus order, round and round: with 29,000 per language the 1,024-entry
translation cache rarely answers, and the engine does the work.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from service.schemas import MAX_BEAM_SIZE, MIN_TIMEOUT_S
from service.settings import Settings

DISCONNECTED = "disconnected"  # a deliberate disconnect: no answer is awaited
NO_ANSWER = "no answer"  # a transport error or a hang: never a correct outcome
PAIRS = (("en", "de"), ("de", "en"))  # the shipped models'


@dataclass(frozen=True)
class Limits:
    """The service's request limits, which the oversize requests and the flood exceed."""

    max_texts: int
    max_chars: int
    max_request_bytes: int
    max_queue_sentences: int

    @classmethod
    def of_default_service(cls) -> Limits:
        # The defaults, not this shell's MT_* variables: the launcher does not pass those on.
        s = Settings.model_construct()
        return cls(s.max_texts, s.max_chars, s.max_request_bytes, s.max_queue_sentences)


@dataclass(frozen=True)
class Hangup:
    """How a deliberate disconnect happens: after ``body_sent`` bytes of the body (None: all of it),
    wait ``after_s``, close the connection."""

    body_sent: int | None
    after_s: float


@dataclass(frozen=True)
class Request:
    kind: str
    path: str
    body: bytes
    expected: frozenset[str]  # outcomes that answer it correctly: status codes, or DISCONNECTED
    hangup: Hangup | None = None


@dataclass(frozen=True)
class Kind:
    weight: int  # share of the steady mix; 0: not part of it
    must_see: frozenset[str]  # outcomes a soak must have produced at least once


def outcomes(*names: str | int) -> frozenset[str]:
    return frozenset(map(str, names))


KINDS: dict[str, Kind] = {
    "translate": Kind(25, outcomes(200)),
    "libretranslate": Kind(15, outcomes(200)),
    "alignments": Kind(10, outcomes(200)),
    "n-best": Kind(10, outcomes(200)),
    "detect": Kind(10, outcomes(200)),
    "bad body": Kind(10, outcomes(400, 422)),
    "oversize": Kind(5, outcomes(413)),  # must be seen; /translate's 400 is the request's own
    # The API's shortest deadline is 1 s (service.schemas.MIN_TIMEOUT_S): whether the heavy requests
    # of this kind outlast it depends on the machine and the load, so a 504 is allowed, not required.
    "timeout": Kind(8, outcomes()),
    "disconnect": Kind(7, outcomes(DISCONNECTED)),
    "flood": Kind(0, outcomes(200, 429)),
}
STEADY = [name for name, kind in KINDS.items() if kind.weight]
# Options no other kind asks for: a timed-out translation is never cached, so with these every
# timeout request waits for the engine, whatever the other kinds have translated before.
TIMEOUT_OPTIONS = {"timeout_s": MIN_TIMEOUT_S, "max_length": 200, "beam_size": MAX_BEAM_SIZE}


def flood_pair(number: int) -> tuple[str, str]:
    return PAIRS[number % len(PAIRS)]


def encoded(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode()


class Traffic:
    """The requests of one soak, drawn from ``sentences`` (``{"en": [...], "de": [...]}``) with a
    seeded generator (which client draws next depends on timing: two runs are alike, not equal)."""

    def __init__(self, sentences: dict[str, list[str]], limits: Limits, seed: int) -> None:
        self.sentences = sentences
        self.limits = limits
        self.rng = random.Random(seed)
        self._next = dict.fromkeys(sentences, 0)
        builders: dict[str, Callable[[], Request]] = {
            "translate": self.translate,
            "libretranslate": self.libretranslate,
            "alignments": self.alignments,
            "n-best": self.n_best,
            "detect": self.detect,
            "bad body": self.bad_body,
            "oversize": self.oversize,
            "timeout": self.timeout,
            "disconnect": self.disconnect,
        }
        self._builders = [builders[name] for name in STEADY]
        self._weights = [KINDS[name].weight for name in STEADY]
        # One byte over the limit, refused by its Content-Length before it is read; built once.
        filler = "a" * limits.max_request_bytes
        self._over_limit = encoded({"text": filler, "target_lang": "de"})

    def steady(self) -> Request:
        return self.rng.choices(self._builders, self._weights)[0]()

    def flood(self, number: int) -> Request:
        """A full-size request of flood ``number``: floods alternate between the pairs, so that both
        models see the largest batches."""
        source, target = flood_pair(number)
        body = {"text": self.texts(source, self.limits.max_texts), "source_lang": source, "target_lang": target}
        return Request("flood", "/v1/translate", encoded(body), outcomes(200, 429))

    # -- the steady mix ----------------------------------------------------------------------

    def translate(self) -> Request:
        source, target = self.pair()
        if self.rng.random() < 0.1:
            text: str | list[str] = "\n".join(" ".join(self.texts(source, 3)) for _ in range(4))
        else:
            text = self.texts(source, self.rng.randint(1, 4))
        body, expected = self.sourced({"text": text, "target_lang": target}, "source_lang", source)
        return Request("translate", "/v1/translate", encoded(body), expected)

    def libretranslate(self) -> Request:
        source, target = self.pair()
        texts = self.texts(source, self.rng.randint(1, 3))
        q: str | list[str] = texts[0] if len(texts) == 1 else texts
        body, expected = self.sourced({"q": q, "target": target, "alternatives": self.rng.choice([0, 0, 2])},
                                      "source", source)  # fmt: skip
        return Request("libretranslate", "/translate", encoded(body), expected)

    def alignments(self) -> Request:
        source, target = self.pair()
        body = {"text": self.texts(source, self.rng.randint(1, 3)), "source_lang": source, "target_lang": target,
                "return_alignments": True, "return_scores": self.rng.random() < 0.5}  # fmt: skip
        return Request("alignments", "/v1/translate", encoded(body), outcomes(200))

    def n_best(self) -> Request:
        source, target = self.pair()
        body = {"text": self.texts(source, self.rng.randint(1, 3)), "source_lang": source, "target_lang": target,
                "beam_size": 5, "num_hypotheses": self.rng.randint(2, 5), "return_scores": True}  # fmt: skip
        return Request("n-best", "/v1/translate", encoded(body), outcomes(200))

    def detect(self) -> Request:
        text = self.texts(self.pair()[0], 1)[0]
        if self.rng.random() < 0.5:
            return Request("detect", "/v1/detect", encoded({"text": text}), outcomes(200))
        return Request("detect", "/detect", encoded({"q": text}), outcomes(200))

    def bad_body(self) -> Request:
        text = self.texts("en", 1)[0]
        path, body, status = self.rng.choice([
            ("/v1/translate", b'{"text": "A dog runs.", "target_lang": ', 422),  # cut short
            ("/v1/translate", b"\xff\xfe not JSON \x00", 422),
            ("/v1/translate", encoded({"text": 42, "target_lang": "de"}), 422),
            ("/v1/translate", encoded({"text": text, "target_lang": "de", "beam_size": "wide"}), 422),
            ("/v1/translate", encoded({"text": text, "target_lang": "de", "temperature": 0.7}), 422),
            ("/v1/translate", encoded({"text": text, "source_lang": "en", "target_lang": "de", "beam_size": 2,
                                       "num_hypotheses": 3}), 422),
            ("/v1/translate", encoded({"text": text, "source_lang": "en", "target_lang": "fr"}), 400),
            ("/translate", encoded({"q": text, "source": "en", "target": "fr"}), 400),
            ("/translate", b'{"q": ', 400),  # LibreTranslate's "Invalid JSON format"
            ("/v1/detect", encoded({"text": ""}), 422),
        ])  # fmt: skip
        return Request("bad body", path, body, outcomes(status))

    def oversize(self) -> Request:
        limits, text = self.limits, self.texts("en", 1)[0]
        long_text = text * (limits.max_chars // len(text) + 1)
        path, body, status = self.rng.choice([
            ("/v1/translate", encoded({"text": self.texts("en", limits.max_texts + 1), "target_lang": "de"}), 413),
            ("/v1/translate", encoded({"text": long_text, "source_lang": "en", "target_lang": "de"}), 413),
            # LibreTranslate answers a text over its limit with 400 ("exceeds text limit"), as ours does
            ("/translate", encoded({"q": long_text, "source": "en", "target": "de"}), 400),
            ("/v1/translate", self._over_limit, 413),
        ])  # fmt: skip
        return Request("oversize", path, body, outcomes(status))

    def timeout(self) -> Request:
        source, target = self.pair()
        count = self.limits.max_texts
        body = {"text": self.texts(source, count), "source_lang": source, "target_lang": target, **TIMEOUT_OPTIONS}
        return Request("timeout", "/v1/translate", encoded(body), outcomes(200, 504))

    def disconnect(self) -> Request:
        source, target = self.pair()
        texts = self.texts(source, self.rng.randint(8, 32))
        path, body = self.rng.choice([
            ("/v1/translate", encoded({"text": texts, "source_lang": source, "target_lang": target,
                                       "num_hypotheses": 3})),
            ("/translate", encoded({"q": texts, "source": source, "target": target})),
        ])  # fmt: skip
        hangup = self.rng.choice([Hangup(len(body) // 2, 0.0), Hangup(None, 0.0),
                                  Hangup(None, self.rng.uniform(0.01, 0.3))])  # fmt: skip
        return Request("disconnect", path, body, outcomes(DISCONNECTED), hangup)

    # -- sentences ---------------------------------------------------------------------------

    def pair(self) -> tuple[str, str]:
        return self.rng.choice(PAIRS)

    def sourced(self, body: dict[str, Any], field: str, source: str) -> tuple[dict[str, Any], frozenset[str]]:
        """``body`` naming its source language, or half the time not (then a 400 is correct too)."""
        if self.rng.random() < 0.5:
            return {**body, field: source}, outcomes(200)
        return body, outcomes(200, 400)

    def texts(self, language: str, count: int) -> list[str]:
        """The next ``count`` sentences in ``language``."""
        lines: Sequence[str] = self.sentences[language]
        start = self._next[language]
        self._next[language] = (start + count) % len(lines)
        return [lines[(start + i) % len(lines)] for i in range(count)]
