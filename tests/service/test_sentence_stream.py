"""``SentenceStream`` alone, on a stand-in runtime whose sentences finish when the test says: what is
submitted when (the first window alone, then the whole window), order, and cancellation."""

from __future__ import annotations

import asyncio

from engine.api import Hypothesis, TranslationResult
from engine.segmenter import split_sentences
from service.planning import Plan
from service.sentence_stream import FIRST_WINDOW, SentenceStream
from service.translation import TranslationJob

TEXT = " ".join(f"Sentence {i}." for i in range(20))
WINDOW = 16
FIRST_BATCH_S = 0.05


class HeldRuntime:
    """``translate_part`` returns when ``finish`` is called for that sentence."""

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.pending: dict[str, asyncio.Future[tuple[TranslationResult, str | None]]] = {}

    async def translate_part(self, plan: Plan, part: str) -> tuple[TranslationResult, str | None]:
        self.submitted.append(part)
        self.pending[part] = asyncio.get_running_loop().create_future()
        return await self.pending[part]

    def finish(self, part: str) -> None:
        self.pending[part].set_result((TranslationResult(part.upper(), [Hypothesis(part.upper(), 0, 0)]), "m:1"))


async def settle() -> None:
    """Let every task that can run, run (each submission is a task of its own)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def started(runtime: HeldRuntime) -> tuple[SentenceStream, asyncio.Task[None]]:
    """A stream of TEXT on ``runtime``, its start under way and its first submissions made."""
    plan = Plan(TranslationJob(texts=[TEXT], target_lang="de"), [None], None, timeout_s=30, text_tokens=[None])
    sentences = split_sentences(TEXT)
    stream = SentenceStream(runtime, plan, sentences, window=WINDOW, first_batch_s=FIRST_BATCH_S)  # type: ignore[arg-type]
    start = asyncio.create_task(stream.start())
    await settle()
    return stream, start


def test_the_first_sentences_go_alone_then_the_whole_window() -> None:
    async def scenario() -> None:
        runtime = HeldRuntime()
        sentences, start = await started(runtime)
        assert runtime.submitted == [f"Sentence {i}." for i in range(FIRST_WINDOW)]
        await asyncio.sleep(2 * FIRST_BATCH_S)  # the first batch has had time to start
        await settle()
        assert len(runtime.submitted) == WINDOW
        runtime.finish("Sentence 0.")
        await start
        await settle()
        assert len(runtime.submitted) == WINDOW + 1  # one done, one more in
        for i in range(1, 20):
            runtime.finish(f"Sentence {i}.")
            await settle()
        parts = [part async for part in sentences]
        assert [p.result.text for p in parts] == [f"SENTENCE {i}." for i in range(20)]
        assert [p.separator for p in parts] == ["", *[" "] * 19]
        await sentences.close()

    asyncio.run(scenario())


def test_the_whole_window_opens_as_soon_as_a_sentence_is_done() -> None:
    async def scenario() -> None:
        runtime = HeldRuntime()
        sentences, start = await started(runtime)
        runtime.finish("Sentence 0.")
        await start
        await settle()
        assert len(runtime.submitted) == WINDOW + 1  # the window full again, before the first batch time is up
        await sentences.close()

    asyncio.run(scenario())


def test_closing_cancels_what_is_left_and_submits_nothing_more() -> None:
    async def scenario() -> None:
        runtime = HeldRuntime()
        sentences, start = await started(runtime)
        start.cancel()
        await sentences.close()
        assert all(f.cancelled() for f in runtime.pending.values())
        await asyncio.sleep(2 * FIRST_BATCH_S)
        await settle()
        assert len(runtime.submitted) == FIRST_WINDOW

    asyncio.run(scenario())
