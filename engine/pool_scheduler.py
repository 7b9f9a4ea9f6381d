"""Iteration-level scheduling: between two steps of a row pool, searches leave and join.

A ``PoolScheduler`` owns one ``engine.pool.RowPool`` and the thread that decodes it. Callers
``submit`` searches (a sub-batch's source ids and its ``engine.decoder.Steps``) from any thread and
wait for their results. Between two steps:

1. searches whose call is cancelled (a request that timed out, a client that left) leave: their
   rows and slots are free before the next step, and their callers get ``Cancelled``;
2. queued searches join while the pool has room for their rows, the call with the least model
   time so far first ("least attained service", as ``engine.scheduler`` hands out turns). Large
   searches (more rows than ``reserve_rows``, a quarter of the pool's by default) hold the pool's
   ``rows`` at most between them, and one larger than the pool joins when no other large one
   holds rows; small ones join while all rows together stay within ``rows``, or within the large
   ones' rows plus the reserve where that is more. So a short request arriving while long ones
   fill the pool joins at the next step, and a long one never waits for short ones to drain:
   each kind waits only for its own. Short requests alone fill no more than ``rows``: with the
   reserve as well, the service served 0.95× the sentences a second at 64 clients
   (benchmarks/RESULTS.md, section 38). None is refused.

   While a heavy call (one whose searches, in the pool and queued, take or took more rows than
   the pool's) has searches in the pool, a small search of a call that is not heavy and has been
   served no more than every heavy one joins the **express pool** instead, while its
   ``reserve_rows`` rows have room: a second ``RowPool`` over the same session, stepped apart
   (3.), so that a short request beside long ones does not pay for their rows at each of its
   steps (in one pool, 0.22 s at the median beside two heavy clients: section 38). A small
   search waiting for the main pool's rows keeps the ones behind it out of the main pool, not
   out of the express pool. Fixed shapes (CUDA graphs) have none: a session's captured graphs
   belong to one pool's blocks.

   Only the searches joining the pool that steps next (3.) are encoded at a boundary, so that
   one pool's joiners are not encoded between two steps of the other, and at most
   ``encode_tokens`` padded source positions of them (a quarter of a sub-batch), sentence by
   sentence and one at least, in runs of like widths: the most deserving joiner's first, then
   those of joiners left over from the last boundary, then the smallest joiners'. A search joins
   once all its sentences are encoded, over as many boundaries as that takes: no step waits for
   more than one budget's encoding, where a long text's sub-batch encoded whole held every row for
   0.15-0.23 s (benchmarks/RESULTS.md, section 40);
3. one step decodes every live row of a pool, and each call is charged its rows' share of the
   step's time. The pool that steps is the one whose least-served call (joiners counted) would be
   least served after the step, counting the step's whole time: a step of the main pool puts its
   least-served call a step ahead, as a heavy sub-batch's turn does on the rectangles
   (``engine.scheduler``), and a short request in the express pool takes steps of its own until it
   is as far ahead.

A search that finishes leaves within the step that finished it, so its rows are free for the next
joiner at once, and a caller's other searches go on.

Plain beam searches (``submit_joinable``: no constraints, alignments or rules that read the step)
are not members of their own: the sentences of every call with the same ``SearchOptions`` join one
``engine.beam_search.JoinableSearch``, the pool's member for those options, and leave it one by one
as each finishes. A pool fed a few sentences at a time (the service's batches) then keeps its rows
busy with one search's bookkeeping per step, however many calls its sentences come from.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from math import inf

import numpy as np

from engine.beam_search import Hypothesis, JoinableSearch, SearchOptions
from engine.decoder import Steps
from engine.pool import Member, RowPool
from engine.runner import Encoded, pad_batch
from engine.scheduler import Cancelled, Task

Encoder = Callable[[np.ndarray], Encoded]
# Padded source positions encoded between two steps: a quarter of a sub-batch, so that a sentence
# decoding beside wide joiners waits 0.06-0.09 s for their encoding at most, not a whole
# sub-batch's 0.15-0.23 s (benchmarks/RESULTS.md, section 40)
ENCODE_TOKENS = 1024
# A search for these options that tells each sentence's hypotheses, by index, as it finishes
SearchFactory = Callable[[SearchOptions, Callable[[int, list[Hypothesis]], None]], JoinableSearch]


@dataclass(eq=False)
class _Queued:
    ids: list[list[int]]  # the sentences' source ids
    steps: Steps | None  # None: its sentences join the pool's search for ``options``
    rows: int  # the most rows it will hold at once
    alignments: bool
    vocab_ids: np.ndarray | None
    task: Task
    future: Future[tuple[object, Timing]]
    order: int
    options: SearchOptions | None = None
    max_lengths: list[int] = field(default_factory=list)
    results: list[list[Hypothesis] | None] = field(default_factory=list)  # of a joining one, as they finish
    timing: Timing | None = None
    deferred: bool = False  # admitted once, some of its sentences left for the next boundary
    pool: RowPool | None = None  # the pool it joins (module docstring)
    parts: list[dict[str, np.ndarray]] = field(default_factory=list)  # its sentences encoded, until it joins
    encode_seconds: float = 0.0

    @property
    def encoded(self) -> int:
        """Sentences encoded so far."""
        return sum(len(part["src_mask"]) for part in self.parts)


@dataclass(eq=False)
class _Shared:
    """The pool's member whose search the sentences of every call with its options join."""

    search: JoinableSearch
    member: Member
    pool: RowPool
    owners: dict[int, tuple[_Queued, int]] = field(default_factory=dict)  # sentence -> (its search, position)

    @property
    def key(self) -> tuple[RowPool, SearchOptions]:
        return self.pool, self.search.options


@dataclass
class Timing:
    """What a search cost: its share of the encoder run it joined with, and its time in the pool."""

    encode_seconds: float = 0.0
    decode_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)


class PoolScheduler:
    def __init__(
        self,
        pool: RowPool,
        encode: Encoder,
        *,
        pad_id: int,
        searches: SearchFactory | None = None,
        name: str = "mt-pool",
        release_idle_s: float = 1.0,
        reserve_rows: int | None = None,
        encode_tokens: int = ENCODE_TOKENS,
    ) -> None:
        """``release_idle_s``: how long the pool stays empty and unasked before its cache's pages
        go back (``RowPool.release``): not as it empties, which between one call's sub-batches
        cost the offline engine 12% of its speed faulting them in again. ``reserve_rows``: the
        rows beyond the pool's that small searches (at most that many rows each) may take
        (module docstring); None: a quarter of the pool's rows. ``encode_tokens``: the padded
        source positions encoded between two steps (module docstring)."""
        self.pool, self.encode, self.pad_id, self.searches = pool, encode, pad_id, searches
        self.release_idle_s = release_idle_s
        self.reserve_rows = pool.config.rows // 4 if reserve_rows is None else reserve_rows
        self.encode_tokens = encode_tokens
        self.express = (
            RowPool(pool.session, pool.shape, replace(pool.config, rows=self.reserve_rows), pool.storage)
            if self.reserve_rows and not pool.config.fixed_shapes
            else None
        )
        self._pools = [p for p in (pool, self.express) if p is not None]
        self._queue: list[_Queued] = []
        self._members: dict[Member, _Queued] = {}  # each member's call (not the shared searches')
        self._shared: dict[tuple[RowPool, SearchOptions], _Shared] = {}
        self._heavy: set[Task] = set()  # calls whose searches take or took more rows than the pool's
        self._step_seconds: dict[RowPool, float] = {}  # each pool's last step
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    @property
    def load(self) -> int:
        """Rows held and queued: where the next search is best sent."""
        with self._changed:
            return sum(p.rows_held for p in self._pools) + sum(q.rows for q in self._queue)

    def submit(
        self,
        ids: list[list[int]],
        steps: Steps,
        *,
        rows: int,
        task: Task,
        alignments: bool = False,
        vocab_ids: np.ndarray | None = None,
    ) -> Future[tuple[object, Timing]]:
        """Decode ``steps`` over the sentences ``ids`` (holding at most ``rows`` rows) in the pool.
        The future's result is the steps' result and timing; its exception what the steps raise,
        or ``Cancelled`` once ``task`` is."""
        future: Future[tuple[object, Timing]] = Future()
        self._enqueue(_Queued(ids, steps, rows, alignments, vocab_ids, task, future, next(self._order)))
        return future

    def _enqueue(self, queued: _Queued) -> None:
        queued.task.cancellation.on_set(self._wake)
        with self._changed:
            if self._closed:
                raise RuntimeError("the pool is closed")
            self._queue.append(queued)
            self._changed.notify_all()

    def submit_joinable(
        self, ids: list[list[int]], max_lengths: list[int], options: SearchOptions, *, task: Task
    ) -> Future[tuple[object, Timing]]:
        """Search the sentences ``ids``, each capped at ``max_lengths`` generated tokens, in the
        pool's search for ``options`` (``engine.beam_search.joinable`` must allow them). The
        future's result is each sentence's hypotheses, and the timing; ``Cancelled`` once ``task`` is."""
        if self.searches is None:
            raise RuntimeError("this pool has no joinable searches")
        future: Future[tuple[object, Timing]] = Future()
        rows = len(ids) * options.beam_size
        queued = _Queued(ids, None, rows, False, None, task, future, next(self._order), options, list(max_lengths))
        queued.results = [None] * len(ids)
        self._enqueue(queued)
        return future

    def close(self) -> None:
        """Finish what was submitted, then stop the thread."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join()

    def _wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    # -- the thread -------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            self._serve()
        except BaseException as e:  # a fault of the pool's own: no caller is left waiting for ever
            with self._changed:
                self._closed = True
                queued, self._queue = self._queue, []
            for member in [m for p in self._pools for m in p.members]:
                if member.on_done is not None:
                    member.on_done(None, e)
            for q in queued:
                q.future.set_exception(e)
            raise

    def _serve(self) -> None:
        while True:
            with self._changed:
                while not (self._queue or self._busy() or self._closed):
                    if not self._changed.wait(self.release_idle_s):
                        for pool in self._pools:
                            pool.release()
                if self._closed and not (self._queue or self._busy()):
                    return
                cancelled = [q for q in self._queue if q.task.cancellation.is_set()]
                for q in cancelled:
                    self._queue.remove(q)
                plan, stepping = self._admit()
            for q in cancelled:
                q.future.set_exception(Cancelled("the translation was cancelled"))
            for member, q in list(self._members.items()):
                if q.task.cancellation.is_set():
                    assert q.pool is not None
                    q.pool.remove(member, Cancelled("the translation was cancelled"))
            for shared in list(self._shared.values()):
                self._drop_cancelled(shared)
            if plan:
                self._join(plan)
            if stepping is not None:
                self._step(stepping)

    def _busy(self) -> bool:
        return any(p.members for p in self._pools)

    def _admit(self) -> tuple[list[tuple[_Queued, int]], RowPool | None]:
        """The queued searches admitted now (module docstring): of each kind by least attained
        service, while they fit; none passes a search of its own kind that waits for the same
        pool: the largest would wait for ever. Of those, the ones that join the pool that steps
        next, each with how many of its sentences are encoded now (``_encoded_now``): the others
        wait for a boundary before their pool's step, so that their encoding does not come
        between two steps of the other pool. Those whose last sentences these are leave the
        queue."""
        if not self._queue:  # every step comes here: the rows held are counted only for a joiner
            return [], self._stepping_next([])
        rows, reserve = self.pool.config.rows, self.reserve_rows
        held = self._held(self.pool)
        small = sum(n for q, n in held if self._small(q))
        large = sum(n for q, n in held if not self._small(q))
        express = sum(n for _, n in self._held(self.express)) if self.express is not None else 0
        self._heavy = self._heavy_calls(held)
        queue = sorted(self._queue, key=_rank)
        joining: list[_Queued] = []
        for q in (q for q in queue if not self._small(q)):
            if large and large + q.rows > rows:
                break
            q.pool, large = self.pool, large + q.rows
            joining.append(q)
        in_pool = [q for q, _ in held] + joining
        lightest = min((q.task.attained_s for q in in_pool if q.task in self._heavy), default=-inf)
        # A small search waiting for the main pool keeps later ones out of it, not out of the express pool
        main_open = True
        for q in (q for q in queue if self._small(q)):
            if self.express is not None and self._light(q, lightest) and express + q.rows <= reserve:
                q.pool, express = self.express, express + q.rows
            elif main_open and small + large + q.rows <= max(rows, large + reserve):
                q.pool, small = self.pool, small + q.rows
            else:
                main_open = False
                continue
            joining.append(q)
        stepping = self._stepping_next(joining)
        plan = self._encoded_now([q for q in joining if q.pool is stepping])
        for q, count in plan:
            if q.encoded + count == len(q.ids):  # it joins at this boundary
                self._queue.remove(q)
        return plan, stepping

    def _stepping_next(self, joining: list[_Queued]) -> RowPool | None:
        """The pool that steps after this boundary, its members and ``joining``'s counted: the
        one whose least-served call would be least served after the step. The step costs every
        call waiting for it its whole time, not its share: a step of the main pool puts its
        least-served call a step ahead, as a heavy sub-batch's turn on the rectangles, and a
        light call in the express pool takes steps of its own until it is as far ahead. With one
        pool busy (offline, and the service without heavy calls) no call is weighed."""
        pools = [p for p in self._pools if p.members or any(q.pool is p for q in joining)]
        if len(pools) < 2:
            return pools[0] if pools else None
        calls = {pool: [task for task, _ in self._charged(pool)] for pool in pools}
        for q in joining:
            assert q.pool is not None
            calls[q.pool].append(q.task)
        return min(pools, key=lambda p: min(t.attained_s for t in calls[p]) + self._step_seconds.get(p, 0.0))

    def _encoded_now(self, joining: list[_Queued]) -> list[tuple[_Queued, int]]:
        """How many more sentences of each of ``joining`` are encoded now (module docstring):
        the most deserving's first, then those left over at the last boundary, then the
        smallest searches', while the boundary stays within ``encode_tokens`` padded positions
        (one sentence at least). A search joins once all its sentences are encoded, so a wide
        one is encoded over several boundaries, never holding up the rows in flight for more
        than one budget; a search left over goes before those that were not. So too with no rows
        in flight: a short request arriving meanwhile waits for one budget, not for every
        joiner's encoding (a sub-batch of a long text's: 0.15-0.23 s)."""
        if not joining:
            return []
        first = min(joining, key=_rank)
        budget = self.encode_tokens
        plan: list[tuple[_Queued, int]] = []
        for q in sorted(joining, key=lambda q: (q is not first, not q.deferred, q.rows)):
            left = len(q.ids) - q.encoded
            count = min(left, budget // _width(q))
            if not plan:
                count = max(count, 1)
            if count:
                plan.append((q, count))
                budget -= count * _width(q)
            q.deferred = count < left
        return plan

    def _held(self, pool: RowPool) -> list[tuple[_Queued, int]]:
        """The searches in ``pool``, each with the rows it holds from the next step on: a
        member's all it may hold, a sentence of the shared searches its beams."""
        held = [(q, q.rows) for q in self._members.values() if q.pool is pool]
        for shared in self._shared.values():
            if shared.pool is pool:
                beams = shared.search.options.beam_size
                held += [(q, beams) for q, _ in shared.owners.values()]
        return held

    def _heavy_calls(self, held: list[tuple[_Queued, int]]) -> set[Task]:
        """The calls whose searches, ``held`` in the pool and queued, take or once took more rows
        than the pool's: calls that fill it alone for a while, to their last search."""
        rows: Counter[Task] = Counter()
        for q, n in [*held, *((q, q.rows) for q in self._queue)]:
            rows[q.task] += n
        return {task for task in rows if task in self._heavy or rows[task] > self.pool.config.rows}

    def _light(self, q: _Queued, lightest: float) -> bool:
        """Whether ``q``, a small search, takes the express pool beside heavy calls the least
        served of which has had ``lightest`` seconds: its call is not heavy and has been served
        no more. A new call starts level with the least-served call in flight, so a sentence
        arriving while only heavy calls run ties with the least served of them."""
        return q.task not in self._heavy and q.task.attained_s <= lightest

    def _small(self, q: _Queued) -> bool:
        """Whether ``q`` is a small search, which may take the reserve."""
        return q.rows <= self.reserve_rows

    def _join(self, plan: list[tuple[_Queued, int]]) -> None:
        """Encode the next ``count`` sentences of each joiner in ``plan``, and give each joiner
        whose sentences are all encoded its rows: in runs of joiners of like widths, each run
        within ``encode_tokens`` padded positions (or one joiner), so that none is padded to
        another's much wider sources."""
        for run in self._runs(plan):
            ids = [s for q, count in run for s in q.ids[q.encoded : q.encoded + count]]
            start = time.perf_counter()
            try:
                # at each joiner's own width: a search's parts are encoded as it would be alone
                encoded = self.encode(pad_batch(ids, self.pad_id, max(_width(q) for q, _ in run))).source
            except Exception as e:
                self._fail([q for q, _ in run], e)
                continue
            seconds = (time.perf_counter() - start) / len(ids)
            first = 0
            for q, count in run:
                sentences = slice(first, first + count)
                first += count
                width = _width(q)
                part = {n: v[sentences, ..., :width, :] for n, v in encoded.items() if n != "src_mask"}
                part["src_mask"] = encoded["src_mask"][sentences, :width]
                q.parts.append(part)
                q.encode_seconds += seconds * count
                if q.encoded == len(q.ids):
                    # the slots become the only copy: a part is a view of its whole encoder run
                    source, q.parts = _joined(q.parts), []
                    self._enter(q, source, Timing(encode_seconds=q.encode_seconds))

    def _fail(self, joiners: list[_Queued], error: BaseException) -> None:
        """``joiners``, whose encoding failed, fail their callers and leave the queue."""
        with self._changed:  # those whose encoding began are still queued
            self._queue = [q for q in self._queue if q not in joiners]
        for q in joiners:
            q.future.set_exception(error)

    def _runs(self, plan: list[tuple[_Queued, int]]) -> list[list[tuple[_Queued, int]]]:
        """``plan`` by width, cut into encoder runs of ``encode_tokens`` padded positions at most."""
        runs: list[list[tuple[_Queued, int]]] = []
        sentences = 0
        for q, count in sorted(plan, key=lambda entry: _width(entry[0])):
            if runs and (sentences + count) * _width(q) <= self.encode_tokens:
                runs[-1].append((q, count))
                sentences += count
            else:
                runs.append([(q, count)])
                sentences = count
        return runs

    def _enter(self, q: _Queued, source: dict[str, np.ndarray], timing: Timing) -> None:
        """``q`` into the pool with its encoded ``source``."""
        if q.steps is None:
            self._join_search(q, source, timing)
            return
        assert q.pool is not None
        member = Member(q.steps, q.alignments, q.vocab_ids)
        member.on_done = functools.partial(self._done, member, q, timing)
        self._members[member] = q
        q.pool.join(member, source)

    def _join_search(self, q: _Queued, source: dict[str, np.ndarray], timing: Timing) -> None:
        """``q``'s sentences into the pool's search for its options, begun if there is none."""
        assert q.options is not None and q.pool is not None and self.searches is not None
        q.timing = timing
        key = (q.pool, q.options)
        shared = self._shared.get(key)
        if shared is None:
            search = self.searches(q.options, functools.partial(self._sentence_done, key))
            shared = _Shared(search, Member(search.steps, False, None), q.pool)
            shared.member.on_done = functools.partial(self._search_left, shared)
            self._shared[key] = shared
            self._own(shared, q, search.add(q.max_lengths))
            q.pool.join(shared.member, source)
        else:
            self._own(shared, q, shared.search.add(q.max_lengths))
            q.pool.extend(shared.member, source, rows=len(q.ids))  # one row each at the first step
            shared.member.request = shared.search.request()

    def _own(self, shared: _Shared, q: _Queued, indices: list[int]) -> None:
        for position, index in enumerate(indices):
            shared.owners[index] = (q, position)

    def _sentence_done(self, key: tuple[RowPool, SearchOptions], index: int, hypotheses: list[Hypothesis]) -> None:
        q, position = self._shared[key].owners.pop(index)
        q.results[position] = hypotheses
        if all(r is not None for r in q.results):
            assert q.timing is not None
            q.timing.decode_seconds = time.perf_counter() - q.timing.started
            q.future.set_result((q.results, q.timing))

    def _search_left(self, shared: _Shared, result: object, error: BaseException | None) -> None:
        """The pool's search for some options ended: every sentence finished, or it failed."""
        if self._shared.get(shared.key) is shared:
            del self._shared[shared.key]
        for q in {q for q, _ in shared.owners.values()}:
            if not q.future.done():
                q.future.set_exception(error or RuntimeError("the search ended before its sentences"))
        shared.owners.clear()

    def _drop_cancelled(self, shared: _Shared) -> None:
        """Take the sentences of cancelled calls out of ``shared``'s search before the next step."""
        gone = {q for q, _ in shared.owners.values() if q.task.cancellation.is_set()}
        if not gone:
            return
        indices = [index for index, (q, _) in shared.owners.items() if q in gone]
        for index in indices:
            del shared.owners[index]
        for q in gone:
            q.future.set_exception(Cancelled("the translation was cancelled"))
        selection = shared.search.drop(indices)
        if not shared.owners:
            shared.pool.remove(shared.member, Cancelled("the translation was cancelled"))
        elif selection is not None:
            shared.pool.apply(shared.member, selection)
            shared.member.request = shared.search.request()

    def _done(self, member: Member, q: _Queued, timing: Timing, result: object, error: BaseException | None) -> None:
        """A member left the pool: finished, failed or cancelled."""
        del self._members[member]
        timing.decode_seconds = time.perf_counter() - timing.started
        if error is not None:
            q.future.set_exception(error)
        else:
            q.future.set_result((result, timing))

    def _step(self, pool: RowPool) -> None:
        """One step of ``pool`` (module docstring); each call is charged its rows' share of its time."""
        charged = self._charged(pool)
        if not charged:
            return
        start = time.perf_counter()
        try:
            pool.step()
        except Exception as e:  # onnxruntime failed: the searches in the step fail, not the pool
            for member in list(pool.members):
                pool.remove(member, e)
        seconds = self._step_seconds[pool] = time.perf_counter() - start
        total = sum(n for _, n in charged) or 1
        with self._changed:
            for task, n in charged:
                task.attained_s += seconds * n / total

    def _charged(self, pool: RowPool) -> list[tuple[Task, int]]:
        """The calls ``pool``'s next step decodes, each with its rows."""
        charged = [(self._members[m].task, len(m.rows)) for m in pool.members if m in self._members]
        for shared in self._shared.values():
            if shared.pool is pool:
                rows = zip(shared.search.sentences(), shared.search.rows_per_sentence(), strict=True)
                charged += [(shared.owners[i][0].task, int(n)) for i, n in rows]
        return charged


def _rank(q: _Queued) -> tuple[float, int, int]:
    """Who deserves to join first: the call with the least model time, then the older."""
    return q.task.attained_s, q.task.order, q.order


def _width(q: _Queued) -> int:
    """The source positions its sentences are encoded at: the longest, and one more."""
    return max(map(len, q.ids)) + 1


def _joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """A search's source from the parts it was encoded in."""
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
