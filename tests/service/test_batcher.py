"""The dynamic batcher against a fake engine whose progress the test controls (no timing assumptions)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from engine.api import BatchStats, TranslatedBatch
from engine.scheduler import Cancellation, Cancelled
from service.batcher import MIN_PART, Batcher, BatcherConfig
from service.errors import DeadlineExceeded, InternalError, Overloaded, Unavailable
from service.metrics import Metrics

LONG = 60.0  # a max_wait / timeout no test ever reaches: batches start only when full


class FakeEngine:
    """Upper-cases texts; records every batch; can be held inside a batch until ``release()``."""

    def __init__(self, *, hold: bool = False) -> None:
        self.batches: list[tuple[list[str], Any]] = []
        self.cancellations: list[Cancellation | None] = []
        self.entered = threading.Event()
        self._gate = threading.Event()
        if not hold:
            self._gate.set()

    def release(self) -> None:
        self._gate.set()

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 1

    def translate_batch(
        self, texts: list[str], options: Any, cancellation: Cancellation | None = None
    ) -> TranslatedBatch:
        self.batches.append((list(texts), options))
        self.cancellations.append(cancellation)
        self.entered.set()
        assert self._gate.wait(30), "test never released the engine"
        if cancellation is not None and cancellation.is_set():
            raise Cancelled("cancelled")
        if "boom" in texts:
            raise RuntimeError("engine failure")
        stats = BatchStats(sub_batches=[(len(texts), sum(map(self.count_tokens, texts)))])
        return TranslatedBatch([f"{t.upper()}/{options}" for t in texts], stats)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never became true")


def make(engine: FakeEngine, **config: Any) -> tuple[Batcher, Metrics]:
    metrics = Metrics()
    batcher = Batcher(engine, BatcherConfig(**config), metrics)
    batcher.start()
    return batcher, metrics


def sample(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    value = metrics.registry.get_sample_value(name, {"model": "", **(labels or {})})
    return 0.0 if value is None else value


def test_concurrent_requests_share_one_batch_and_get_their_own_results() -> None:
    async def main() -> None:
        engine = FakeEngine()
        batcher, metrics = make(engine, max_batch_sentences=4, max_wait_s=LONG)
        texts = [["a b"], ["c"], ["d e f"], ["g"]]
        results = await asyncio.gather(*(batcher.translate(t, "opt", timeout_s=LONG) for t in texts))
        assert results == [[f"{t[0].upper()}/opt"] for t in texts]
        assert engine.batches == [(["a b", "c", "d e f", "g"], "opt")]
        assert sample(metrics, "mt_batch_size_sentences_sum") == 4
        assert sample(metrics, "mt_batch_size_sentences_count") == 1
        assert sample(metrics, "mt_stage_duration_seconds_count", {"stage": "queue"}) == 4
        await batcher.close()

    run(main)


def test_a_request_larger_than_a_batch_is_split_and_reassembled_in_order() -> None:
    async def main() -> None:
        engine = FakeEngine()
        batcher, _ = make(engine, max_batch_sentences=3, max_wait_s=0)
        texts = [f"t{i}" for i in range(8)]
        assert await batcher.translate(texts, "o", timeout_s=LONG) == [f"T{i}/o" for i in range(8)]
        assert [len(b) for b, _ in engine.batches] == [3, 3, 2]
        await batcher.close()

    run(main)


def test_token_limit_bounds_batches_but_a_long_text_still_runs_alone() -> None:
    async def main() -> None:
        engine = FakeEngine()
        batcher, _ = make(engine, max_batch_sentences=100, max_batch_tokens=6, max_wait_s=0)
        long_text = " ".join(["w"] * 20)  # 21 tokens, over the limit on its own
        texts = ["a b", "c d", long_text, "e"]  # 3 + 3 + 21 + 2 tokens
        await batcher.translate(texts, "o", timeout_s=LONG)
        assert [b for b, _ in engine.batches] == [["a b", "c d"], [long_text], ["e"]]
        await batcher.close()

    run(main)


def test_only_requests_with_equal_options_are_merged() -> None:
    async def main() -> None:
        engine = FakeEngine()
        batcher, _ = make(engine, max_batch_sentences=2, max_wait_s=LONG)
        results = await asyncio.gather(
            batcher.translate(["a"], "beam4", timeout_s=LONG),
            batcher.translate(["b"], "beam1", timeout_s=LONG),
            batcher.translate(["c"], "beam4", timeout_s=LONG),
            batcher.translate(["d"], "beam1", timeout_s=LONG),
        )
        assert results == [["A/beam4"], ["B/beam1"], ["C/beam4"], ["D/beam1"]]
        assert sorted(engine.batches) == [(["a", "c"], "beam4"), (["b", "d"], "beam1")]
        await batcher.close()

    run(main)


def test_a_partial_batch_starts_after_max_wait() -> None:
    async def main() -> None:
        engine = FakeEngine()
        batcher, _ = make(engine, max_batch_sentences=64, max_wait_s=0.001)
        assert await batcher.translate(["x"], "o", timeout_s=LONG) == ["X/o"]
        await batcher.close()

    run(main)


def test_without_a_wait_work_that_arrives_while_the_worker_is_busy_forms_one_batch() -> None:
    """The default: a free worker takes a lone text at once, and batches still grow with load."""

    async def main() -> None:
        engine = FakeEngine(hold=True)
        batcher, _ = make(engine, max_batch_sentences=32)
        assert batcher.config.max_wait_s == 0
        first = asyncio.ensure_future(batcher.translate(["a"], "o", timeout_s=LONG))
        await until(engine.entered.is_set)
        rest = [asyncio.ensure_future(batcher.translate([t], "o", timeout_s=LONG)) for t in ("b", "c", "d")]
        await until(lambda: batcher.queued_sentences == 3)
        engine.release()
        assert await asyncio.gather(first, *rest) == [["A/o"], ["B/o"], ["C/o"], ["D/o"]]
        assert [b for b, _ in engine.batches] == [["a"], ["b", "c", "d"]]
        await batcher.close()

    run(main)


def test_overload_is_refused_at_once_with_retry_after() -> None:
    async def main() -> None:
        engine = FakeEngine(hold=True)
        batcher, metrics = make(engine, max_batch_sentences=2, max_wait_s=0, max_queue_sentences=4)
        running = asyncio.ensure_future(batcher.translate(["a", "b"], "o", timeout_s=LONG))
        await until(engine.entered.is_set)  # first batch is inside the engine, the queue is empty
        queued = asyncio.ensure_future(batcher.translate(["c", "d", "e"], "o", timeout_s=LONG))
        await until(lambda: batcher.queued_sentences == 3)
        with pytest.raises(Overloaded) as refused:
            await batcher.translate(["f", "g"], "o", timeout_s=LONG)
        assert refused.value.retry_after_s >= 1
        assert refused.value.headers["Retry-After"] == str(refused.value.retry_after_s)
        assert sample(metrics, "mt_queue_depth_sentences") == 3
        engine.release()
        assert await running == ["A/o", "B/o"]
        assert await queued == ["C/o", "D/o", "E/o"]
        assert await batcher.translate(["f", "g"], "o", timeout_s=LONG) == ["F/o", "G/o"]
        await batcher.close()

    run(main)


def test_deadline_drops_queued_work() -> None:
    async def main() -> None:
        engine = FakeEngine(hold=True)
        batcher, metrics = make(engine, max_batch_sentences=1, max_wait_s=0)
        running = asyncio.ensure_future(batcher.translate(["a"], "o", timeout_s=LONG))
        await until(engine.entered.is_set)
        with pytest.raises(DeadlineExceeded):
            await batcher.translate(["late", "later"], "o", timeout_s=0.01)
        assert batcher.queued_sentences == 0
        assert sample(metrics, "mt_queue_depth_sentences") == 0
        engine.release()
        assert await running == ["A/o"]
        await batcher.close()
        assert [b for b, _ in engine.batches] == [["a"]]  # the timed-out texts never reached the engine

    run(main)


def test_cancelled_request_drops_queued_work() -> None:
    async def main() -> None:
        engine = FakeEngine(hold=True)
        batcher, _ = make(engine, max_batch_sentences=1, max_wait_s=0)
        running = asyncio.ensure_future(batcher.translate(["a"], "o", timeout_s=LONG))
        await until(engine.entered.is_set)
        gone = asyncio.ensure_future(batcher.translate(["x", "y"], "o", timeout_s=LONG))
        await until(lambda: batcher.queued_sentences == 2)
        gone.cancel()  # what the service does when the client disconnects
        await until(lambda: batcher.queued_sentences == 0)
        engine.release()
        assert await running == ["A/o"]
        await batcher.close()
        assert [b for b, _ in engine.batches] == [["a"]]

    run(main)


def test_engine_failure_fails_only_its_batch() -> None:
    async def main() -> None:
        engine = FakeEngine()
        batcher, _ = make(engine, max_batch_sentences=1, max_wait_s=0)
        with pytest.raises(InternalError):
            await batcher.translate(["boom", "never"], "o", timeout_s=LONG)
        assert await batcher.translate(["fine"], "o", timeout_s=LONG) == ["FINE/o"]
        await batcher.close()
        assert [b for b, _ in engine.batches] == [["boom"], ["fine"]]  # the failed request's rest was dropped

    run(main)


def test_close_finishes_admitted_work_then_refuses() -> None:
    async def main() -> None:
        engine = FakeEngine()
        batcher, _ = make(engine, max_batch_sentences=8, max_wait_s=LONG)
        pending = asyncio.ensure_future(batcher.translate(["a", "b"], "o", timeout_s=LONG))
        await until(lambda: batcher.queued_sentences == 2)
        await batcher.close()  # does not wait out max_wait: the partial batch runs at once
        assert await pending == ["A/o", "B/o"]
        with pytest.raises(Unavailable):
            await batcher.translate(["c"], "o", timeout_s=LONG)

    run(main)


def test_empty_request_needs_no_engine() -> None:
    async def main() -> None:
        engine = FakeEngine()
        batcher, _ = make(engine)
        assert await batcher.translate([], "o", timeout_s=LONG) == []
        await batcher.close()
        assert engine.batches == []

    run(main)


def test_with_concurrency_two_batches_run_at_once() -> None:
    async def main() -> None:
        both_inside = threading.Barrier(2, timeout=10)

        class TwoAtOnce(FakeEngine):
            def translate_batch(self, texts: list[str], options: Any, cancellation: Any = None) -> TranslatedBatch:
                both_inside.wait()  # raises BrokenBarrierError unless a second batch arrives meanwhile
                return super().translate_batch(texts, options, cancellation)

        engine = TwoAtOnce()
        batcher, _ = make(engine, max_batch_sentences=1, max_wait_s=0, concurrency=2)
        results = await asyncio.gather(*(batcher.translate([t], "o", timeout_s=LONG) for t in ("a", "b")))
        assert results == [["A/o"], ["B/o"]]
        assert sorted(b for b, _ in engine.batches) == [["a"], ["b"]]
        await batcher.close()

    run(main)


def test_free_workers_split_a_batch_in_parts_of_at_least_min_part() -> None:
    async def main() -> None:
        engine = FakeEngine()
        batcher, _ = make(engine, max_batch_sentences=32, max_wait_s=0, concurrency=3)
        assert MIN_PART == 4
        for n, parts in [(11, [5, 6]), (8, [4, 4]), (7, [7]), (12, [4, 4, 4])]:
            engine.batches.clear()
            texts = [f"t{i}" for i in range(n)]
            assert await batcher.translate(texts, "o", timeout_s=LONG) == [f"T{i}/o" for i in range(n)]
            assert sorted(len(b) for b, _ in engine.batches) == parts, n
        await batcher.close()

    run(main)


def test_with_the_other_worker_busy_a_batch_is_not_split() -> None:
    async def main() -> None:
        engine = FakeEngine(hold=True)
        batcher, _ = make(engine, max_batch_sentences=32, max_wait_s=0, concurrency=2)
        first = asyncio.ensure_future(batcher.translate(["a"], "o", timeout_s=LONG))
        await until(engine.entered.is_set)
        texts = [f"t{i}" for i in range(10)]
        second = asyncio.ensure_future(batcher.translate(texts, "o", timeout_s=LONG))
        await until(lambda: len(engine.batches) == 2)
        engine.release()
        await asyncio.gather(first, second)
        assert [b for b, _ in engine.batches] == [["a"], texts]
        await batcher.close()

    run(main)


def test_the_next_batch_is_taken_before_the_finished_batch_is_answered() -> None:
    """The engine must not sit idle while a finished batch's responses are written."""

    async def main() -> None:
        engine = FakeEngine(hold=True)
        batcher, _ = make(engine, max_batch_sentences=1, max_wait_s=LONG)
        first = asyncio.ensure_future(batcher.translate(["a"], "o", timeout_s=LONG))
        await until(engine.entered.is_set)
        second = asyncio.ensure_future(batcher.translate(["b"], "o", timeout_s=LONG))
        await until(lambda: batcher.queued_sentences == 1)
        queued_when_first_answered = []
        first.add_done_callback(lambda _: queued_when_first_answered.append(batcher.queued_sentences))
        engine.release()
        assert await asyncio.gather(first, second) == [["A/o"], ["B/o"]]
        assert queued_when_first_answered == [0], "the second batch was still queued"
        await batcher.close()

    run(main)


def test_a_light_request_starts_while_heavy_batches_hold_every_worker() -> None:
    """A heavy request (more than heavy_tokens) occupies the only heavy slot and queues more heavy
    work; a light one arriving after it still starts at once, in a batch of its own."""

    async def main() -> None:
        engine = FakeEngine(hold=True)
        batcher, _ = make(engine, max_batch_sentences=2, max_wait_s=0, concurrency=1, heavy_tokens=10)
        heavy_texts = [" ".join(["w"] * 6)] * 4  # 7 tokens each: 28 together
        heavy = asyncio.ensure_future(batcher.translate(heavy_texts, "o", timeout_s=LONG))
        await until(lambda: len(engine.batches) == 1)
        light = asyncio.ensure_future(batcher.translate(["a b"], "o", timeout_s=LONG))
        await until(lambda: len(engine.batches) == 2)
        assert engine.batches[1] == (["a b"], "o"), "the light batch is not behind the heavy queue"
        engine.release()
        assert await light == ["A B/o"]
        assert len(await heavy) == 4
        await batcher.close()

    run(main)


def test_a_running_batch_is_cancelled_once_every_request_in_it_has_gone() -> None:
    async def main() -> None:
        engine = FakeEngine(hold=True)
        batcher, _ = make(engine, max_batch_sentences=4, max_wait_s=0)
        alone = asyncio.ensure_future(batcher.translate(["a"], "o", timeout_s=LONG))
        await until(lambda: len(engine.batches) == 1)
        first, second = (asyncio.ensure_future(batcher.translate([t], "o", timeout_s=LONG)) for t in ("b", "c"))
        alone.cancel()  # the client left: its batch serves nobody else
        await until(lambda: engine.cancellations[0].is_set())
        engine.release()
        await until(lambda: len(engine.batches) == 2)
        assert engine.batches[1][0] == ["b", "c"]
        second.cancel()  # the batch still serves the first request: it must finish
        assert await first == ["B/o"]
        assert not engine.cancellations[1].is_set()
        await batcher.close()

    run(main)


def test_a_timed_out_request_cancels_its_running_batch() -> None:
    async def main() -> None:
        engine = FakeEngine(hold=True)
        batcher, _ = make(engine, max_batch_sentences=4, max_wait_s=0)
        with pytest.raises(DeadlineExceeded):
            await batcher.translate(["a", "b"], "o", timeout_s=0.05)
        assert engine.cancellations[0].is_set()
        engine.release()
        assert await batcher.translate(["c"], "o", timeout_s=LONG) == ["C/o"]
        await batcher.close()

    run(main)


def test_the_parts_of_a_heavy_request_sent_one_by_one_go_in_the_heavy_lane() -> None:
    """A stream sends its long text a sentence at a time: each sentence is light alone, but the
    request's tokens put it in the heavy lane, where it no longer queues a light request behind it."""

    async def main() -> None:
        engine = FakeEngine(hold=True)
        batcher, _ = make(engine, max_batch_sentences=2, max_wait_s=0, concurrency=1, heavy_tokens=10)
        parts = [
            asyncio.ensure_future(batcher.translate([text], "o", timeout_s=LONG, request_tokens=100))
            for text in ("p q", "r s")
        ]
        await until(lambda: len(engine.batches) == 1)
        light = asyncio.ensure_future(batcher.translate(["a b"], "o", timeout_s=LONG))
        await until(lambda: len(engine.batches) == 2)
        assert engine.batches[1] == (["a b"], "o"), "the light request waited behind the request's parts"
        engine.release()
        assert await light == ["A B/o"]
        assert await asyncio.gather(*parts) == [["P Q/o"], ["R S/o"]]
        await batcher.close()

    run(main)
