"""The step scheduler with threads and fake steps (sleeps inside turns): who gets the turns, how
many at once, and cancellation at the next turn."""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.scheduler import Cancellation, Cancelled, StepScheduler

LONG_STEP_S = 0.05  # a long batch's decoder step
SHORT_STEP_S = 0.001  # a lone sentence's


def run_steps(scheduler: StepScheduler, name: str, steps: int, seconds: float, log: list[str], **task: object) -> None:
    with scheduler.task(**task) as t:
        for _ in range(steps):
            with t.turn():
                log.append(name)
                time.sleep(seconds)


def test_a_lone_task_takes_every_turn_and_is_charged_for_them() -> None:
    scheduler = StepScheduler()
    with scheduler.task() as task:
        for _ in range(3):
            with task.turn():
                time.sleep(SHORT_STEP_S)
        assert task.taken == 3 and task.attained_s >= 3 * SHORT_STEP_S
    assert scheduler.tasks == 0


def test_a_short_task_arriving_during_a_long_one_is_served_between_its_steps() -> None:
    """The short task needs less time in all than one long step: once it has its first turn, it
    takes every turn until it is done, and the long task waits at most the one step it was in."""
    scheduler, log = StepScheduler(), []
    with ThreadPoolExecutor(2) as pool:
        long = pool.submit(run_steps, scheduler, "long", 20, LONG_STEP_S, log)
        while log.count("long") < 3:
            time.sleep(0.001)
        short = pool.submit(run_steps, scheduler, "short", 10, SHORT_STEP_S, log)
        short.result(timeout=30)
        long.result(timeout=30)
    first = log.index("short")
    assert log[first : first + 10] == ["short"] * 10
    assert log.count("long") == 20


def test_long_tasks_share_the_turns() -> None:
    scheduler, log = StepScheduler(), []
    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(run_steps, scheduler, "a", 12, 0.01, log)
        while not log:
            time.sleep(0.001)
        b = pool.submit(run_steps, scheduler, "b", 12, 0.01, log)
        a.result(timeout=30), b.result(timeout=30)
    # once both are in, neither runs more than two turns in a row until one is done
    both = log[log.index("b") : max(i for i, name in enumerate(log) if name == "a")]
    assert max(len(list(run)) for _, run in itertools.groupby(both)) <= 2, log


def test_capacity_gives_that_many_turns_at_once() -> None:
    scheduler = StepScheduler(capacity=2)
    inside = threading.Barrier(2, timeout=10)  # broken unless two turns overlap

    def one() -> None:
        with scheduler.task() as task, task.turn():
            inside.wait()

    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(one), pool.submit(one)]:
            future.result(timeout=30)


def test_a_cancelled_task_stops_at_its_next_turn_and_a_waiting_one_at_once() -> None:
    scheduler, log = StepScheduler(), []
    holding, waiting = Cancellation(), Cancellation()
    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(run_steps, scheduler, "running", 1_000, 0.01, log, cancellation=holding)
        while not log:
            time.sleep(0.001)
        queued = pool.submit(run_steps, scheduler, "queued", 1_000, 0.01, log, cancellation=waiting)
        waiting.set()
        with pytest.raises(Cancelled):
            queued.result(timeout=30)
        holding.set()
        with pytest.raises(Cancelled):
            running.result(timeout=30)
    assert log.count("running") < 1_000
    assert scheduler.tasks == 0


def test_a_cancellation_calls_back_once_even_when_registered_late() -> None:
    calls: list[str] = []
    cancellation = Cancellation()
    cancellation.on_set(lambda: calls.append("early"))
    cancellation.set()
    cancellation.set()
    cancellation.on_set(lambda: calls.append("late"))
    assert calls == ["early", "late"] and cancellation.is_set()
