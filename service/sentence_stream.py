"""One text translated sentence by sentence, each handed out in order as soon as it is done.

The streaming route plans the whole text once (``Runtime.plan``: key, limits, language, route) and
gives its sentences (``engine.segmenter.split_units``) to a ``SentenceStream``. The stream keeps
up to ``window`` of them in the model's batcher, each as a text of its own, so that they share
batches with one another and with other requests, and submits the next whenever one finishes. The
window is the most texts one request may queue (MT_MAX_TEXTS): a long text gets its batches without
taking the queue that other requests share, and fits in it even when the text has more sentences
than the queue has room. Its first ``FIRST_WINDOW`` sentences go first, alone, so that the first
event comes after a small batch rather than a full one. The plan's deadline holds for the whole text, as it does for
/v1/translate. ``close`` cancels what is left, which drops its queued sentences from the batcher.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from engine.api import TranslationResult
from engine.segmenter import SegmentedText
from service.errors import DeadlineExceeded
from service.planning import Plan
from service.runtime import Runtime

# Sentences submitted first, alone: a batch this small ends soon, so that the first event does not
# wait for a batch of the whole window. The rest follow once the batcher has had time to start that
# batch (``first_batch_s``), and share the next one: the first event comes early and the last no
# later (benchmarks/RESULTS.md, section 11).
FIRST_WINDOW = 8


@dataclass(frozen=True)
class Part:
    """One sentence of the text and its translation."""

    index: int
    source: str
    separator: str  # what comes before the sentence in the text
    result: TranslationResult
    model: str | None  # None: passed through


class SentenceStream:
    def __init__(
        self, runtime: Runtime, plan: Plan, sentences: SegmentedText, *, window: int, first_batch_s: float
    ) -> None:
        self._runtime = runtime
        self._plan = plan
        self._sentences = sentences
        self._window = window
        self._limit = min(window, FIRST_WINDOW)  # the whole window once the first batch has started
        self._first_batch_s = first_batch_s
        self._opening: asyncio.TimerHandle | None = None
        self._tasks: list[asyncio.Task[tuple[TranslationResult, str | None]]] = []
        self._running = 0
        self._stopped = False  # closed, or a sentence failed: nothing more is submitted
        self._deadline = asyncio.get_running_loop().time() + plan.timeout_s

    @property
    def trailing(self) -> str:
        """What comes after the last sentence in the text (all of a text without sentences)."""
        return self._sentences.separators[-1]

    async def start(self) -> None:
        """Submit the first window and wait for the first sentence, raising any failure before it:
        the route can still answer that with an HTTP error."""
        self._fill()
        self._opening = asyncio.get_running_loop().call_later(self._first_batch_s, self._open)
        async with self._within_deadline():
            while self._tasks:
                for task in self._tasks:
                    if task.done() and not task.cancelled() and (error := task.exception()) is not None:
                        raise error
                if self._tasks[0].done():
                    return
                await asyncio.wait([t for t in self._tasks if not t.done()], return_when=asyncio.FIRST_COMPLETED)

    async def __aiter__(self) -> AsyncIterator[Part]:
        """The sentences in order, each once it and all before it are translated; raises the first failure."""
        sentences = zip(self._sentences.segments, self._sentences.separators[:-1], strict=True)
        for index, (sentence, separator) in enumerate(sentences):
            self._fill()
            async with self._within_deadline():
                result, model = await self._tasks[index]
            yield Part(index, sentence.text, separator, result, model)

    async def close(self) -> None:
        """Cancel every sentence still queued or running, and wait until they have left the batcher."""
        self._stopped = True
        if self._opening is not None:
            self._opening.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _fill(self) -> None:
        """Submit the next sentences until the window is full or none is left."""
        segments = self._sentences.segments
        while not self._stopped and self._running < self._limit and len(self._tasks) < len(segments):
            part = self._runtime.translate_part(self._plan, segments[len(self._tasks)].text)
            task = asyncio.create_task(part)
            task.add_done_callback(self._finished)
            self._tasks.append(task)
            self._running += 1

    def _open(self) -> None:
        self._limit = self._window
        self._fill()

    def _finished(self, task: asyncio.Task[tuple[TranslationResult, str | None]]) -> None:
        self._running -= 1
        self._limit = self._window
        # The stream ends at a failure: sentences after it would be translated for nothing.
        if task.cancelled() or task.exception() is not None:
            self._stopped = True
        self._fill()

    @asynccontextmanager
    async def _within_deadline(self) -> AsyncIterator[None]:
        try:
            async with asyncio.timeout_at(self._deadline):
                yield
        except TimeoutError:
            raise DeadlineExceeded(f"request not finished within {self._plan.timeout_s:g} s") from None
