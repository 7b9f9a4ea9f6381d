"""Iteration-level scheduling: batches in flight share the model one decoder step at a time.

A translation call is a ``Task``. Every unit of model work it does (an encoder pass, a decoder step)
runs in a turn, and a ``StepScheduler`` hands out turns, at most ``capacity`` at once (one per
stream). A search holds its turn from one decoder step to the next (``Turns``): the Python work
between two steps is part of the step, and a task that gave its turn back at the end of each model
call would find it taken by the next waiting task every time it came back for another.

When more tasks wait than turns are free, the next turn goes to the task that has
used the least model time so far ("least attained service"): a short batch arriving while a long
one decodes gets its steps between the long one's, so it finishes in about its own decoding time
plus one of the long batch's steps, instead of waiting for the whole long batch. Long tasks share
the model's time evenly among themselves. A task joining starts level with the least served task in
flight (as a woken thread in Linux's CFS does), so that a newcomer is not served alone until it has
caught up with a task that has run for a minute. One task alone takes its turns without waiting.

A task is cancelled through its ``Cancellation`` (a request that timed out, a client that left): its
next turn raises ``Cancelled``, so it stops costing compute at the next decoder step, and the rows
it held leave with it.

The scheduler knows nothing of models or HTTP: tests drive it with threads and fake steps.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


class Cancelled(Exception):
    """The task was cancelled; its work was stopped at a step boundary."""


class Cancellation:
    """Set once, from any thread; whoever waits on a task's turn sees it at once."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def set(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def is_set(self) -> bool:
        return self._event.is_set()

    def on_set(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when this is set (at once if it already is)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()


@dataclass(eq=False)
class Task:
    """One translation call's share of the model."""

    scheduler: StepScheduler
    cancellation: Cancellation
    order: int  # arrival order: ties in attained service go to the older task
    attained_s: float = 0.0  # model time used so far
    waiting: int = 0  # turns it is waiting for (several when its sub-batches run on several streams)
    taken: int = 0  # turns taken

    @contextmanager
    def turns(self) -> Iterator[Turns]:
        """Turns taken one after another by one thread; the last is given back at the end."""
        turns = Turns(self)
        try:
            yield turns
        finally:
            turns.release()

    @contextmanager
    def turn(self) -> Iterator[None]:
        """One turn for the body."""
        with self.turns() as turns:
            turns.next()
            yield


class Turns:
    """One thread's turns of a task, held from one ``next()`` to the next."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self._since: float | None = None  # when the turn held was taken; None: none held

    def next(self) -> None:
        """Give back the turn held, if any, and wait for the next; ``Cancelled`` if the task is (or
        gets) cancelled before it."""
        self.release()
        self.task.scheduler._acquire(self.task)
        self._since = time.perf_counter()

    def release(self) -> None:
        if self._since is not None:
            self.task.scheduler._release(self.task, time.perf_counter() - self._since)
            self._since = None


class StepScheduler:
    """Hands out at most ``capacity`` turns at once, each to the waiting task with the least attained
    service."""

    def __init__(self, capacity: int = 1) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._busy = 0
        self._tasks: set[Task] = set()
        self._order = itertools.count()
        self._changed = threading.Condition()

    @property
    def tasks(self) -> int:
        """Tasks in flight."""
        with self._changed:
            return len(self._tasks)

    @contextmanager
    def task(self, cancellation: Cancellation | None = None) -> Iterator[Task]:
        """A task for the duration of a translation call."""
        task = Task(self, cancellation or Cancellation(), next(self._order))
        # A cancellation must wake the task if it is waiting for a turn.
        task.cancellation.on_set(self._wake)
        with self._changed:
            task.attained_s = min((t.attained_s for t in self._tasks), default=0.0)
            self._tasks.add(task)
        try:
            yield task
        finally:
            with self._changed:
                self._tasks.discard(task)
                self._changed.notify_all()

    def _acquire(self, task: Task) -> None:
        with self._changed:
            task.waiting += 1
            try:
                while True:
                    if task.cancellation.is_set():
                        raise Cancelled("the translation was cancelled")
                    if self._busy < self.capacity and task is self._next():
                        break
                    self._changed.wait()
            finally:
                task.waiting -= 1
            self._busy += 1

    def _release(self, task: Task, seconds: float) -> None:
        with self._changed:
            self._busy -= 1
            task.attained_s += seconds
            task.taken += 1
            self._changed.notify_all()

    def _next(self) -> Task | None:
        """The waiting task whose turn is next."""
        waiting = [t for t in self._tasks if t.waiting]
        return min(waiting, key=lambda t: (t.attained_s, t.order), default=None)

    def _wake(self) -> None:
        with self._changed:
            self._changed.notify_all()
