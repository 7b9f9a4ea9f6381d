"""The row pool (engine/pool.py, engine/pool_graph.py, engine/pool_scheduler.py) on a real bundle.

The pool's step is checked against the exported step (the rectangle cache), and searches in the
pool against the same searches alone and on the rectangle decoder: joining while others run,
sentences leaving, beams reordered, sources wider than a bucket, the pool full; then the
scheduler's cancellation and its order of joining.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from engine import beam_search, forced_decoding
from engine.beam_search import SearchOptions
from engine.bundle import check_graph, load_bundle
from engine.decoder import Steps
from engine.forced_decoding import Forced
from engine.pool import Member, PoolConfig, RowPool
from engine.pool_graph import PoolGraphError, present_output, with_pool_inputs
from engine.pool_scheduler import PoolScheduler
from engine.pool_storage import DeviceStorage
from engine.runner import DecoderShape, Encoded, Runner, RunnerConfig, pad_batch
from engine.scheduler import Cancellation, Cancelled, StepScheduler, Task

BOS, EOS = 2, 3


def runner_for(bundle: Path, variant: str = "fp32", *, pool: bool) -> Runner:
    loaded = load_bundle(bundle)
    d = loaded.manifest.dimensions
    shape = DecoderShape(d.decoder_layers, d.heads, d.d_head, d.vocab_size)
    return Runner(*loaded.graph_paths(variant), shape, RunnerConfig(provider="cpu", threads=1, pool=pool))


@pytest.fixture(scope="module")
def pooled(tiny_bundle: Path) -> Runner:
    return runner_for(tiny_bundle, pool=True)


@pytest.fixture(scope="module")
def rectangle(tiny_bundle: Path) -> Runner:
    return runner_for(tiny_bundle, pool=False)


def sentences(n: int, seed: int, longest: int = 30) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [[*rng.integers(4, 150, int(rng.integers(1, longest))).tolist(), EOS] for _ in range(n)]


def searched(ids: Sequence[Sequence[int]], beam: int, *, alignments: bool = False) -> Steps:
    options = SearchOptions(beam_size=beam, num_hypotheses=beam, return_alignments=alignments)
    return beam_search.search_steps([len(s) + 8 for s in ids], options, bos_id=BOS, eos_id=EOS)


def member(
    runner: Runner, ids: list[list[int]], steps: Steps, results: list, *, alignments: bool = False, width: int = 0
) -> tuple[Member, dict[str, np.ndarray]]:
    """A member of the pool for ``ids`` and its source, encoded with ``width`` source positions if
    more than ``pad_batch`` gives; its result or error goes into ``results``."""
    src = pad_batch(ids, 0)
    source = runner.encode(np.pad(src, ((0, 0), (0, max(0, width - src.shape[1]))))).source
    joined = Member(steps, alignments, None)
    joined.on_done = lambda result, error: results.append(error if error is not None else result)
    return joined, source


def run(pool: RowPool, schedule: dict[int, list[tuple[Member, dict[str, np.ndarray]]]]) -> None:
    """Step the pool until every member is done, each joining before the step its key says."""
    step = 0
    while pool.members or any(at >= step for at in schedule):
        for joining, source in schedule.get(step, []):
            pool.join(joining, source)
        pool.step()
        step += 1


def alone(runner: Runner, ids: list[list[int]], beam: int, *, alignments: bool = False) -> list:
    pool, results = RowPool(runner.decoder, runner.shape, PoolConfig()), []
    run(pool, {0: [member(runner, ids, searched(ids, beam, alignments=alignments), results, alignments=alignments)]})
    return results[0]


def same(a: list[list[beam_search.Hypothesis]], b: list[list[beam_search.Hypothesis]], source: int = 0) -> bool:
    """Bitwise the same hypotheses: tokens, scores and attention (its first ``source`` positions
    if given: a source padded more has more)."""
    for x, y in zip(a, b, strict=True):
        for h, g in zip(x, y, strict=True):
            if h.tokens != g.tokens or h.score != g.score:
                return False
            if (h.attention is None) != (g.attention is None):
                return False
            width = source or None
            if h.attention is not None and not np.array_equal(h.attention[:, :width], g.attention[:, :width]):
                return False
    return True


# -- the step graph ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["fp32", "int8"])
def test_the_pool_step_computes_the_exported_step_over_ragged_rows(tiny_bundle: Path, variant: str) -> None:
    """Rows at one position in a rectangle cache, and the same rows in a wider buffer, out of
    order, one sentence with a single row: the same log-probabilities, new keys (written into the
    buffer at the rows' position, after the cached ones) and attention."""
    rect, pool = runner_for(tiny_bundle, variant, pool=False), runner_for(tiny_bundle, variant, pool=True)
    check_graph(pool.decoder, "decoder", load_bundle(tiny_bundle).manifest, where="pool step")
    shape = rect.shape
    rng = np.random.default_rng(0)
    source = rect.encode(pad_batch(sentences(3, 1), 0)).source
    P, W, K = 5, 16, 2
    N = 3 * K
    names = shape.names
    caches = {name: rng.standard_normal((N, shape.heads, P, shape.d_head)).astype(np.float32) for name in names}
    tokens = rng.integers(4, shape.vocab, (N, 1))
    feed = {"tokens": tokens, **caches, **source, "candidates": np.array([6])}
    expected = dict(zip([o.name for o in rect.decoder.get_outputs()], rect.decoder.run(None, feed), strict=True))
    order = np.array([5, 4, 3, 2, 0])  # sentence 2's rows swapped, sentence 0 with one row
    buffers = {name: np.zeros((len(order), shape.heads, W, shape.d_head), np.float32) for name in names}
    for name in names:
        buffers[name][:, :, :P] = caches[name][order]
        buffers[name][:, :, P:] = 7.0  # what lies past a row's length must not matter
    pooled = {
        "tokens": tokens[order],
        **buffers,
        **source,
        "candidates": np.array([6]),
        "positions": np.full(len(order), P),
        "query_slots": np.array([4, 4, 3, 2, 1, 0]),  # slot 0's one row (twice), slot 1's and slot 2's two
        "row_slots": np.array([5, 4, 3, 2, 0]),
        "total_length": np.array(W, dtype=np.int32),  # the buffer's width: each row reads its own P
    }
    got = dict(zip([o.name for o in pool.decoder.get_outputs()], pool.decoder.run(None, pooled), strict=True))
    np.testing.assert_allclose(got["log_probs"], expected["log_probs"][order], atol=2e-5)
    np.testing.assert_allclose(got["alignment"], expected["alignment"][order], atol=1e-6)
    for name in names:
        present = got[present_output(name)]
        np.testing.assert_allclose(present[:, :, P], expected[f"new_{name}"][order][:, :, P], atol=1e-5)
        assert np.array_equal(present[:, :, :P], buffers[name][:, :, :P])
    assert np.array_equal(got["top_ids"], expected["top_ids"][order])


def test_a_graph_the_edit_does_not_know_is_refused(tiny_bundle: Path) -> None:
    model = onnx.load(str(load_bundle(tiny_bundle).graph_paths("fp32")[0]))  # the encoder
    with pytest.raises(PoolGraphError, match="not an exported decoder step"):
        with_pool_inputs(model)


# -- searches in the pool ---------------------------------------------------------------------


def test_the_slots_are_the_only_copy_of_a_source_the_pool_keeps(pooled: Runner) -> None:
    """Once a search has joined, its encoder output is no longer held (the slots hold its keys and
    values): a running search does not keep a second copy of its source for its whole life."""
    ids = sentences(4, 1)
    pool, results = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16)), []
    joining, source = member(pooled, ids, searched(ids, 4), results)
    held = [weakref.ref(value) for value in source.values()]
    pool.join(joining, source)
    del source
    pool.step()
    assert pool.members and not results  # still searching
    assert [ref() for ref in held] == [None] * len(held)
    run(pool, {})
    assert same(results[0], alone(pooled, ids, 4))


@pytest.mark.parametrize("beam", [1, 4])
def test_searches_joining_a_running_pool_get_what_they_get_alone(pooled: Runner, beam: int) -> None:
    """Three searches join at steps 0, 3 and 7 (rows of other lengths and positions in flight, a
    source wider than the others'): each gets bitwise what it gets alone in the pool, with its
    attention, and what the rectangle decoder gives, token for token."""
    batches = [sentences(5, 1), sentences(3, 2, longest=60), sentences(6, 3, longest=8)]
    results: dict[int, list] = {i: [] for i in range(3)}
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=64))
    schedule = {
        at: [member(pooled, ids, searched(ids, beam, alignments=True), results[i], alignments=True)]
        for i, (at, ids) in enumerate(zip((0, 3, 7), batches, strict=True))
    }
    run(pool, schedule)
    for i, ids in enumerate(batches):
        assert same(results[i][0], alone(pooled, ids, beam, alignments=True)), i
    assert pool.rows_held == 0 and pool.n_slots == 0


@pytest.mark.parametrize("beam", [1, 4])
def test_the_pool_with_its_blocks_in_device_memory_decodes_bitwise_as_in_host_memory(pooled: Runner, beam: int) -> None:
    """``DeviceStorage`` (OrtValues, every move a graph run) on the CPU's device: searches joining
    a running pool, wider sources, rows growing past the pool's rows and leaving, slots freed and
    filled: the same hypotheses, scores and attention, bit for bit, as with the host's numpy blocks."""
    batches = [sentences(5, 1), sentences(3, 2, longest=60), sentences(6, 3, longest=8), sentences(9, 4)]
    got = {}
    for name, storage in (("host", None), ("device", DeviceStorage("cpu"))):
        results: dict[int, list] = {i: [] for i in range(len(batches))}
        pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16), storage)
        schedule = {
            at: [member(pooled, ids, searched(ids, beam, alignments=True), results[i], alignments=True)]
            for i, (at, ids) in enumerate(zip((0, 2, 5, 6), batches, strict=True))
        }
        run(pool, schedule)
        assert pool.rows_held == 0 and pool.n_slots == 0
        got[name] = [results[i][0] for i in range(len(batches))]
    for on_host, on_device in zip(got["host"], got["device"], strict=True):
        assert same(on_host, on_device)


def test_the_pool_as_cuda_runs_it_translates_as_the_float32_pool(tiny_bundle: Path, pooled: Runner) -> None:
    """The step CUDA loads (``decoder_graph(cuda=True, pool=True)``: float16 caches, attention cast
    in and out), its blocks in device memory, here on the CPU's device: the graph passes the
    bundle's check, and the search ends as in the float32 pool, within float16's rounding."""
    from engine.runner import decoder_graph, load_session

    path = tiny_bundle / "decoder.onnx"
    graph = decoder_graph(path, shortlist=False, cuda=True, pool=True)
    session = load_session(path, "cpu", RunnerConfig(provider="cpu", threads=1), graph)
    check_graph(session, "decoder", load_bundle(tiny_bundle).manifest, where="the CUDA pool's step")
    assert {i.type for i in session.get_inputs() if i.name.startswith("self_")} == {"tensor(float16)"}
    ids = sentences(16, 4)
    results: list = []
    pool = RowPool(session, pooled.shape, PoolConfig(rows=32), DeviceStorage("cpu"))
    run(pool, {0: [member(pooled, ids, searched(ids, 4), results)]})
    half, full = results[0], alone(pooled, ids, 4)
    assert sum(h[0].tokens == f[0].tokens for h, f in zip(half, full, strict=True)) >= 15
    np.testing.assert_allclose([h[0].score for h in half], [f[0].score for f in full], atol=0.01)


@pytest.mark.parametrize("beam", [1, 4])
def test_the_pool_translates_as_the_rectangle_decoder(pooled: Runner, rectangle: Runner, beam: int) -> None:
    ids = sentences(16, 4)
    in_pool = alone(pooled, ids, beam)
    encoded = rectangle.encode(pad_batch(ids, 0))
    options = SearchOptions(beam_size=beam, num_hypotheses=beam)
    on_rectangle = beam_search.search(
        rectangle.start(encoded, alignments=False), [len(s) + 8 for s in ids], options, bos_id=BOS, eos_id=EOS
    )
    for pool_hyps, rect_hyps in zip(in_pool, on_rectangle, strict=True):
        assert [h.tokens for h in pool_hyps] == [h.tokens for h in rect_hyps]
        np.testing.assert_allclose([h.score for h in pool_hyps], [h.score for h in rect_hyps], atol=1e-4)


def test_forced_decoding_in_the_pool_scores_as_alone(pooled: Runner) -> None:
    """Several translations of one sentence read its one slot; scored beside a search, each gets
    its score and attention as when scored alone."""
    ids = sentences(2, 5)
    translations = [[Forced((5, 6, 7)), Forced((8, 9), eos=False), Forced(())], [Forced((10, 11, 12, 13))]]

    def scoring() -> Steps:
        return forced_decoding.score_steps(translations, bos_id=BOS, eos_id=EOS, prefix_length=0, length_penalty=1.0)

    together: list = []
    beside: list = []
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig())
    others = sentences(4, 6)
    schedule = {
        0: [member(pooled, others, searched(others, 4), beside)],
        2: [member(pooled, ids, scoring(), together, alignments=True)],
    }
    run(pool, schedule)
    first: list = []
    fresh = RowPool(pooled.decoder, pooled.shape, PoolConfig())
    run(fresh, {0: [member(pooled, ids, scoring(), first, alignments=True)]})
    assert same(together[0], first[0])
    assert [len(t) for t in together[0]] == [3, 1]


def test_padding_does_not_change_a_sentence_by_a_single_bit(pooled: Runner) -> None:
    """The property batch invariance rests on: with at least one padding position, more padding
    of the source, and a wider cache (more cached positions masked), leave a sentence's outputs
    bitwise unchanged."""
    rng = np.random.default_rng(0)
    for length in range(2, 40, 3):
        sentence = [*rng.integers(4, 150, length - 1).tolist(), EOS]
        outputs = []
        for extra in (1, 2, 5, 64 - length):
            pool, results = RowPool(pooled.decoder, pooled.shape, PoolConfig(positions=64 * (1 + extra % 3))), []
            ids = [sentence, [5, 3]]
            steps = searched(ids, 2, alignments=True)
            run(pool, {0: [member(pooled, ids, steps, results, alignments=True, width=length + extra)]})
            outputs.append(results[0][0])
        for other in outputs[1:]:
            assert same([outputs[0]], [other], source=length), length


def joinable_search(beam: int, finished: dict[int, list]) -> beam_search.JoinableSearch:
    options = SearchOptions(beam_size=beam, num_hypotheses=beam)
    return beam_search.JoinableSearch(options, finished.__setitem__, bos_id=BOS, eos_id=EOS, forced_eos="model_score")


@pytest.mark.parametrize("beam", [1, 4])
def test_sentences_joining_one_search_get_what_they_get_alone(pooled: Runner, beam: int) -> None:
    """Sentences join one running search at steps 0, 2 and 5 (rows of one row and of K in one
    step, a source wider than the others'): each gets bitwise the hypotheses it gets searched
    alone, and leaves the pool as it finishes."""
    batches = [sentences(4, 11), sentences(3, 12, longest=60), sentences(5, 13, longest=8)]
    finished: dict[int, list] = {}
    search = joinable_search(beam, finished)
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=64))
    indices, step = [], 0
    for at, ids in zip((0, 2, 5), batches, strict=True):
        while step < at:
            pool.step()
            step += 1
        source = pooled.encode(pad_batch(ids, 0)).source
        indices.append(search.add([len(s) + 8 for s in ids]))
        if at == 0:
            pool.join(Member(search.steps, False, None), source)
        else:
            [shared] = pool.members
            pool.extend(shared, source, rows=len(ids))
            shared.request = search.request()
    while pool.members:
        pool.step()
    for ids, joined in zip(batches, indices, strict=True):
        assert same([finished[i] for i in joined], alone(pooled, ids, beam))
    assert pool.rows_held == 0 and pool.n_slots == 0


def test_a_search_that_sentences_join_refuses_rules_that_read_the_step() -> None:
    for options in [
        SearchOptions(min_length=2),
        SearchOptions(no_repeat_ngram_size=3),
        SearchOptions(return_alignments=True),
    ]:
        with pytest.raises(ValueError, match="needs no minimum length"):
            beam_search.JoinableSearch(options, print, bos_id=BOS, eos_id=EOS, forced_eos="model_score")


def test_calls_sharing_one_search_are_cancelled_alone(pooled: Runner) -> None:
    """Three calls' sentences in the pool's one search for their options: the cancelled call's
    rows leave at the next step, the others get what they get alone, and the search ends with them."""
    factory = functools.partial(beam_search.JoinableSearch, bos_id=BOS, eos_id=EOS, forced_eos="model_score")
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=64))
    scheduler = PoolScheduler(pool, pooled.encode, pad_id=0, searches=factory)
    tasks = StepScheduler()
    options = SearchOptions(beam_size=4, num_hypotheses=4)
    long = [[*range(4, 60), EOS]] * 3
    try:
        with tasks.task() as doomed, tasks.task() as first, tasks.task() as second:
            ids = [sentences(3, 14), sentences(2, 15, longest=50)]
            kept = [
                scheduler.submit_joinable(i, [len(s) + 8 for s in i], options, task=t)
                for i, t in zip(ids, (first, second), strict=True)
            ]
            stopped = scheduler.submit_joinable(long, [120] * 3, options, task=doomed)
            doomed.cancellation.set()
            with pytest.raises(Cancelled):
                stopped.result(timeout=60)
            for batch, future in zip(ids, kept, strict=True):
                result, timing = future.result(timeout=60)
                assert same(result, alone(pooled, batch, 4))  # type: ignore[arg-type]
                assert timing.decode_seconds > 0
    finally:
        scheduler.close()
    assert pool.rows_held == 0 and not pool.members


def test_a_full_pool_queues_searches_and_a_failing_search_fails_alone(pooled: Runner) -> None:
    """More rows than the pool holds: every search is decoded, none refused; a search whose
    steps raise fails its own caller only."""
    scheduler = PoolScheduler(
        RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16)), pooled.encode, pad_id=0, name="test-pool"
    )
    tasks = StepScheduler()
    try:
        with tasks.task() as task:
            batches = [sentences(4, seed) for seed in range(6)]  # 16 rows each at beam 4
            futures = [scheduler.submit(ids, searched(ids, 4), rows=16, task=task) for ids in batches]
            mismatched = beam_search.search_steps([3], SearchOptions(), bos_id=BOS, eos_id=EOS, prefixes=[[5], [6]])
            broken = scheduler.submit([[5, 3]], mismatched, rows=4, task=task)
            for ids, future in zip(batches, futures, strict=True):
                result, timing = future.result(timeout=60)
                assert same(result, alone(pooled, ids, 4))  # type: ignore[arg-type]
                assert timing.decode_seconds > 0
            with pytest.raises(ValueError, match="2 prefixes for 1 sentences"):
                broken.result(timeout=60)
    finally:
        scheduler.close()
    assert scheduler.pool.rows_held == 0


def test_the_cache_s_pages_go_back_once_the_pool_is_idle_not_as_it_empties(pooled: Runner) -> None:
    """Between one caller's searches the pool keeps its cache (faulting its pages in again after
    every search cost the offline engine 12%); once nothing has asked for release_idle_s, they go
    back: fresh buffers, every row's length 0."""
    scheduler = PoolScheduler(
        RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16)), pooled.encode, pad_id=0, release_idle_s=2.0
    )
    tasks = StepScheduler()
    try:
        with tasks.task() as task:
            ids = sentences(4, 0)
            scheduler.submit(ids, searched(ids, 4), rows=16, task=task).result(timeout=60)
        pool, held = scheduler.pool, scheduler.pool.cache
        assert pool.rows_held == 0 and pool.lengths.any() and pool.cache is held
        deadline = time.monotonic() + 30
        while pool.cache is held and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pool.cache is not held and not pool.lengths.any()
    finally:
        scheduler.close()


def held_after_its_first_step(steps: Steps, started: threading.Event, release: threading.Event) -> Steps:
    """``steps``, holding the pool's thread after their first step until ``release`` is set: the
    search is running, whatever the machine's load, when the test cancels it."""
    step = yield next(steps)
    started.set()
    release.wait(timeout=60)
    while True:
        try:
            request = steps.send(step)
        except StopIteration as done:
            return done.value
        step = yield request


def recorded_scheduler(pooled: Runner) -> tuple[PoolScheduler, dict[int, str], list[Joined]]:
    """A scheduler of a pool of 16 rows (its reserve and express pool 4), and ``recorded_joins``'s
    names and joins."""
    scheduler = PoolScheduler(RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16)), pooled.encode, pad_id=0)
    names, joined, _ = recorded_joins(scheduler)
    return scheduler, names, joined


def submit_held(
    scheduler: PoolScheduler, names: dict[int, str], name: str, task: Task, release: threading.Event
) -> Future:
    """A large search of ``task`` (16 rows of long sources) submitted as ``name``, holding the pool's
    thread after its first step until ``release`` is set; once it holds it, its future."""
    started = threading.Event()
    search = beam_search.search_steps([120] * 4, SearchOptions(beam_size=4), bos_id=BOS, eos_id=EOS)
    steps = held_after_its_first_step(search, started, release)
    names[id(steps)] = name
    future = scheduler.submit([[*range(4, 60), EOS]] * 4, steps, rows=16, task=task)
    assert started.wait(timeout=60)
    return future


def test_a_cancelled_call_leaves_at_the_next_step_and_others_go_on(pooled: Runner) -> None:
    scheduler = PoolScheduler(RowPool(pooled.decoder, pooled.shape, PoolConfig()), pooled.encode, pad_id=0)
    tasks = StepScheduler()
    long = [[*range(4, 60), EOS]] * 4
    started, release = threading.Event(), threading.Event()
    try:
        with tasks.task() as doomed, tasks.task() as kept:
            search = beam_search.search_steps([120] * 4, SearchOptions(beam_size=4), bos_id=BOS, eos_id=EOS)
            stopped = scheduler.submit(long, held_after_its_first_step(search, started, release), rows=16, task=doomed)
            ids = sentences(3, 9)
            other = scheduler.submit(ids, searched(ids, 4), rows=12, task=kept)
            assert started.wait(timeout=60)
            doomed.cancellation.set()
            release.set()
            with pytest.raises(Cancelled):
                stopped.result(timeout=60)
            assert same(other.result(timeout=60)[0], alone(pooled, ids, 4))  # type: ignore[arg-type]
    finally:
        scheduler.close()
    assert scheduler.pool.rows_held == 0


class Joined(NamedTuple):
    name: str
    express: bool  # into the express pool
    held: int  # the rows the (main) pool held as it joined
    step: int  # the (main) pool's steps before it joined


def recorded_joins(scheduler: PoolScheduler) -> tuple[dict[int, str], list[Joined], list[int]]:
    """The names to give searches' steps, the searches that join ``scheduler``'s pools, in order,
    and a counter of the (main) pool's steps."""
    names: dict[int, str] = {}
    joined: list[Joined] = []
    steps = counted_steps(scheduler.pool)

    def record(pool: RowPool) -> None:
        original = pool.join

        def recording(m: Member, source: dict[str, np.ndarray]) -> None:
            joined.append(Joined(names[id(m.steps)], pool is scheduler.express, scheduler.pool.rows_held, steps[0]))
            original(m, source)

        pool.join = recording  # type: ignore[method-assign]

    for pool in filter(None, (scheduler.pool, scheduler.express)):
        record(pool)
    return names, joined, steps


def order(joined: list[Joined]) -> list[str]:
    return [j.name for j in joined]


def counted_steps(pool: RowPool) -> list[int]:
    """A counter of ``pool``'s steps from now on."""
    steps = [0]
    original = pool.step

    def counted() -> None:
        steps[0] += 1
        original()

    pool.step = counted  # type: ignore[method-assign]
    return steps


def test_the_least_served_call_joins_first(pooled: Runner) -> None:
    """A heavy call's searches wait for room; a light call (as large: no reserve) submitted after
    them joins before the heavy call's next one, since it has had no model time yet."""
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16))
    scheduler = PoolScheduler(pool, pooled.encode, pad_id=0, reserve_rows=0)
    names, joined, _ = recorded_joins(scheduler)
    tasks = StepScheduler()
    try:
        with tasks.task() as heavy, tasks.task(Cancellation()) as light:
            futures = []
            for i in range(3):
                ids = sentences(4, 20 + i, longest=40)
                steps = searched(ids, 4)
                names[id(steps)] = f"heavy-{i}"
                futures.append(scheduler.submit(ids, steps, rows=16, task=heavy))
            heavy.attained_s += 1.0  # as if it had run a while
            ids = sentences(1, 30)
            steps = searched(ids, 4)
            names[id(steps)] = "light"
            futures.append(scheduler.submit(ids, steps, rows=4, task=light))
            for future in futures:
                future.result(timeout=60)
    finally:
        scheduler.close()
    assert order(joined).index("light") < order(joined).index("heavy-2")


@pytest.mark.parametrize(
    ("heavy_call", "light_served", "device"),
    [(True, 1.0, False), (True, 10.0, False), (True, 20.0, False), (False, 1.0, False), (True, 1.0, True)],
)
def test_a_small_search_beside_large_ones_joins_at_the_next_step(
    pooled: Runner, heavy_call: bool, light_served: float, device: bool
) -> None:
    """Large searches hold all of the pool's rows and more wait; a one-sentence search joins at the
    next step and gets what it gets alone. Beside a heavy call (its searches more rows than the
    pool's) served no more than it, it joins the express pool; served less, it takes every step
    until it is done, as the rectangles' scheduler gives it turns. Served more than the heavy call,
    or beside calls that are not heavy, it joins the pool's reserve and shares the large ones'
    steps. ``device``:
    the pools' blocks in device memory (CUDA's path, run on the CPU)."""
    storage = DeviceStorage("cpu") if device else None
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16), storage)
    scheduler = PoolScheduler(pool, pooled.encode, pad_id=0)
    assert scheduler.reserve_rows == 4 and scheduler.express is not None
    assert scheduler.express.storage is pool.storage
    names, joined, main_steps = recorded_joins(scheduler)
    finished_at = []
    tasks = StepScheduler()
    started, release = threading.Event(), threading.Event()
    long = [[*range(4, 60), EOS]] * 4
    try:
        with tasks.task() as heavy, tasks.task() as other, tasks.task() as light:
            first = beam_search.search_steps([120] * 4, SearchOptions(beam_size=4), bos_id=BOS, eos_id=EOS)
            steps = held_after_its_first_step(first, started, release)
            names[id(steps)] = "heavy-0"
            futures = [scheduler.submit(long, steps, rows=16, task=heavy)]
            assert started.wait(timeout=60)  # the pool's thread holds heavy-0 in its first step
            ids = sentences(4, 40)
            steps = searched(ids, 4)
            names[id(steps)] = "heavy-1"
            futures.append(scheduler.submit(ids, steps, rows=16, task=heavy if heavy_call else other))
            ids = sentences(1, 41)
            steps = searched(ids, 4)
            names[id(steps)] = "light"
            heavy.attained_s, other.attained_s, light.attained_s = 10.0, 10.0, light_served
            small = scheduler.submit(ids, steps, rows=4, task=light)
            small.add_done_callback(lambda _: finished_at.append(main_steps[0]))  # in the pool's thread
            release.set()
            assert same(small.result(timeout=60)[0], alone(pooled, ids, 4))  # type: ignore[arg-type]
            for future in futures:
                future.result(timeout=60)
    finally:
        scheduler.close()
    assert order(joined) == ["heavy-0", "light", "heavy-1"]
    assert joined[1].held == 16  # heavy-0's 16 rows were in the pool as it joined
    assert joined[1].express == (heavy_call and light_served <= 10.0)
    if joined[1].express and light_served < 10.0:
        assert finished_at == [joined[1].step]  # no step of the large ones' pool in between
    elif not joined[1].express:
        assert finished_at[0] > joined[1].step
    assert scheduler.express.rows_held == pool.rows_held == 0


def test_a_small_search_joins_the_reserve_when_the_express_pool_is_full(pooled: Runner) -> None:
    """Two small searches beside a heavy call: the first fills the express pool, the second joins
    the pool's reserve at the main pool's next step rather than wait for the express pool. Their
    calls are served just less than the heavy one, so the pools take turns within a few steps."""
    scheduler, names, joined = recorded_scheduler(pooled)
    tasks = StepScheduler()
    release = threading.Event()
    try:
        with tasks.task() as heavy, tasks.task() as first, tasks.task() as second:
            heavy.attained_s, first.attained_s, second.attained_s = 1.0, 0.999, 0.9995
            futures = [submit_held(scheduler, names, "large", heavy, release)]
            ids = sentences(4, 72)
            steps = searched(ids, 4)
            names[id(steps)] = "large-1"  # waits: the heavy call's rows are more than the pool's
            futures.append(scheduler.submit(ids, steps, rows=16, task=heavy))
            smalls = {}
            for name, seed, task in (("first", 70, first), ("second", 71, second)):
                smalls[name] = sentences(1, seed)
                steps = searched(smalls[name], 4)
                names[id(steps)] = name
                futures.append(scheduler.submit(smalls[name], steps, rows=4, task=task))
            release.set()
            results = [future.result(timeout=60)[0] for future in futures]
    finally:
        scheduler.close()
    assert [(j.name, j.express) for j in joined] == [
        ("large", False),
        ("first", True),
        ("second", False),
        ("large-1", False),
    ]
    for ids, result in zip(smalls.values(), results[2:], strict=True):
        assert same(result, alone(pooled, ids, 4))  # type: ignore[arg-type]


def test_a_small_search_waiting_for_the_reserve_keeps_no_light_one_from_the_express_pool(pooled: Runner) -> None:
    """Beside a heavy call's large searches, a second heavy call of five small searches, older
    than a light call and served as much: its first search takes the main pool's reserve, the
    others wait for it, and the light search behind them joins the express pool at the same
    boundary, not once the first is charged a step and falls behind it in the queue."""
    scheduler, names, joined = recorded_scheduler(pooled)
    tasks = StepScheduler()
    release = threading.Event()
    try:
        with tasks.task() as large, tasks.task() as heavy, tasks.task() as light:
            futures = [submit_held(scheduler, names, "large-0", large, release)]
            queued = [("large-1", large, 4, 79)] + [(f"small-{i}", heavy, 1, 80 + i) for i in range(5)]
            for name, task, n, seed in [*queued, ("light", light, 1, 90)]:
                ids = sentences(n, seed)
                steps = searched(ids, 4)
                names[id(steps)] = name
                futures.append(scheduler.submit(ids, steps, rows=4 * n, task=task))
            large.attained_s, heavy.attained_s, light.attained_s = 5.0, 1.0, 1.0
            release.set()
            for future in futures:
                future.result(timeout=60)
    finally:
        scheduler.close()
    where = {j.name: j.express for j in joined}
    assert where["light"] and not any(where[f"small-{i}"] for i in range(5))
    at = {j.name: j.step for j in joined}
    assert at["light"] <= at["small-0"] < at["small-1"]


def test_a_large_search_does_not_wait_for_small_ones_to_drain(pooled: Runner) -> None:
    """Small searches alone fill the pool's rows, no more (another waits); a large search joins
    beside them at the next step (its rows are the pool's, not theirs), ahead of the small one."""
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16))
    scheduler = PoolScheduler(pool, pooled.encode, pad_id=0, reserve_rows=4)
    names, joined, _ = recorded_joins(scheduler)
    tasks = StepScheduler()
    holds = [(threading.Event(), threading.Event()) for _ in range(2)]
    long = [[*range(4, 60), EOS]]
    futures = []

    def submit(name: str, ids: list[list[int]], steps: Steps, rows: int) -> None:
        names[id(steps)] = name
        futures.append(scheduler.submit(ids, steps, rows=rows, task=task))

    def held(i: int) -> Steps:
        search = beam_search.search_steps([120], SearchOptions(beam_size=4), bos_id=BOS, eos_id=EOS)
        return held_after_its_first_step(search, *holds[i])

    try:
        with tasks.task() as task:
            submit("small-0", long, held(0), 4)
            assert holds[0][0].wait(timeout=60)
            submit("small-1", long, held(1), 4)
            for i in range(2, 5):
                ids = sentences(1, 50 + i)
                submit(f"small-{i}", ids, searched(ids, 4), 4)
            holds[0][1].set()
            assert holds[1][0].wait(timeout=60)  # smalls 0-3 in the pool, its 16 rows; small-4 waits
            ids = sentences(4, 60)
            submit("large", ids, searched(ids, 4), 16)
            holds[1][1].set()
            for future in futures:
                future.result(timeout=60)
    finally:
        scheduler.close()
    joins = order(joined)
    assert joins[0] == "small-0" and set(joins[1:4]) == {"small-1", "small-2", "small-3"}  # one boundary
    assert joins[4:] == ["large", "small-4"] and joined[4].held == 16
    assert not any(j.express for j in joined)  # one call: the small ones are served as much as the large one


def test_a_boundary_encodes_a_budget_s_worth_and_a_wide_search_joins_once_all_encoded(pooled: Runner) -> None:
    """While rows are in flight, one boundary encodes at most ``encode_tokens`` padded source
    positions, sentence by sentence (one at least): the most deserving search's first, then
    those left over, then the smallest. A search joins once all its sentences are encoded, over
    as many boundaries as that takes, and gets bitwise what it gets alone."""
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=64))
    runs: list[tuple[int, int]] = []  # each encoder run's (sentences, positions)

    def encode(src: np.ndarray) -> Encoded:
        runs.append(src.shape)
        return pooled.encode(src)

    scheduler = PoolScheduler(pool, encode, pad_id=0, encode_tokens=200)
    names, joined, _ = recorded_joins(scheduler)
    tasks = StepScheduler()
    started, release = threading.Event(), threading.Event()
    # 38 positions each (its longest and one more), 5 sentences a boundary; the last ones narrower alone
    wide = [[*range(4, 4 + n), EOS] for n in (36, 30, 20, 20)]
    try:
        with tasks.task() as task:
            first = beam_search.search_steps([120] * 4, SearchOptions(beam_size=4), bos_id=BOS, eos_id=EOS)
            steps = held_after_its_first_step(first, started, release)
            names[id(steps)] = "running"
            futures = [scheduler.submit(wide, steps, rows=16, task=task)]
            assert started.wait(timeout=60)
            for name in ("a", "b", "c"):
                steps = searched(wide, 4)
                names[id(steps)] = name
                futures.append(scheduler.submit(wide, steps, rows=16, task=task))
            release.set()
            results = [future.result(timeout=60)[0] for future in futures]
    finally:
        scheduler.close()
    # a: all 4 (152 positions), b: 1; then b: 3, c: 2; then c: 2
    assert runs[1:] == [(5, 38), (5, 38), (2, 38)]
    assert order(joined) == ["running", "a", "b", "c"]
    at = {j.name: j.step for j in joined}
    assert at["b"] == at["a"] + 1 and at["c"] == at["b"] + 1
    expected = alone(pooled, wide, 4)
    assert all(same(result, expected) for result in results[1:])


def test_a_search_whose_later_sentences_fail_to_encode_fails_alone(pooled: Runner) -> None:
    """A search encoded over several boundaries whose second part the encoder refuses: its
    caller gets the error, it leaves the queue with what was encoded of it, and a search
    submitted beside it is decoded as alone."""
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=64))
    poisoned = 99

    def encode(src: np.ndarray) -> Encoded:
        if (src == poisoned).any():
            raise RuntimeError("the encoder failed")
        return pooled.encode(src)

    scheduler = PoolScheduler(pool, encode, pad_id=0, encode_tokens=100)
    tasks = StepScheduler()
    started, release = threading.Event(), threading.Event()
    wide = [[*range(4, 40), EOS]] * 2 + [[poisoned, *range(4, 39), EOS]]  # 38 positions: 2 a boundary
    other = sentences(2, 7)
    try:
        with tasks.task() as task:
            running = sentences(2, 8)
            steps = held_after_its_first_step(searched(running, 4), started, release)
            futures = [scheduler.submit(running, steps, rows=8, task=task)]
            assert started.wait(timeout=60)
            failing = scheduler.submit(wide, searched(wide, 4), rows=12, task=task)
            futures.append(scheduler.submit(other, searched(other, 4), rows=8, task=task))
            release.set()
            with pytest.raises(RuntimeError, match="the encoder failed"):
                failing.result(timeout=60)
            results = [future.result(timeout=60)[0] for future in futures]
    finally:
        scheduler.close()
    assert same(results[1], alone(pooled, other, 4))
    assert scheduler.load == 0


@pytest.mark.parametrize("joinable", [False, True])
def test_a_search_decoding_in_the_pool_leaves_no_encoder_output_alive(pooled: Runner, joinable: bool) -> None:
    """Through the scheduler too, the slots are the only copy of a source: a search encoded over
    two boundaries holds its parts, views of whole encoder runs, until it joins, and none of
    them once it decodes (kept, they held 60 MB at the OPUS-MT size: benchmarks/RESULTS.md,
    section 41)."""
    outputs: list[weakref.ref] = []

    def encode(src: np.ndarray) -> Encoded:
        encoded = pooled.encode(src)
        outputs.extend(weakref.ref(value) for value in encoded.source.values())
        return encoded

    factory = functools.partial(beam_search.JoinableSearch, bos_id=BOS, eos_id=EOS, forced_eos="model_score")
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=64))
    scheduler = PoolScheduler(pool, encode, pad_id=0, encode_tokens=100, searches=factory)
    alive: list[int] = []  # encoder outputs alive as each step begins
    step = pool.step

    def counted() -> None:
        alive.append(sum(ref() is not None for ref in outputs))
        step()

    pool.step = counted  # type: ignore[method-assign]
    wide = [[*range(4, 40), EOS]] * 3  # 38 positions: 2 sentences a boundary
    tasks = StepScheduler()
    try:
        with tasks.task() as task:
            if joinable:
                options = SearchOptions(beam_size=4, num_hypotheses=4)
                future = scheduler.submit_joinable(wide, [len(s) + 8 for s in wide], options, task=task)
            else:
                future = scheduler.submit(wide, searched(wide, 4), rows=12, task=task)
            result = future.result(timeout=60)[0]
    finally:
        scheduler.close()
    assert len(outputs) == 2 * len(pooled.source_names)  # two encoder runs
    assert alive and not any(alive)
    assert same(result, alone(pooled, wide, 4))  # type: ignore[arg-type]


# -- the translator and the service on the pool -----------------------------------------------


def test_the_translator_on_the_pool_translates_as_on_rectangles(tiny_bundle: Path) -> None:
    """Alternatives, alignments, a glossary and markup, through both paths: the same texts; and
    on the pool, a sentence alone and in a batch of mixed lengths gets bitwise the same result."""
    from engine.api import TranslationOptions
    from engine.glossary import Glossary, Term
    from engine.translator import Translator, TranslatorConfig

    words = ["a", "the", "man", "woman", "dog", "cat", "child", "red", "big", "runs", "sits", "plays", "in", "park"]
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(words, int(rng.integers(1, 30)))).capitalize() + "." for _ in range(24)]
    configs = {
        pool: TranslatorConfig(model_dir=tiny_bundle, provider="cpu", threads=1, pool=pool) for pool in (True, False)
    }
    translators = {pool: Translator(config) for pool, config in configs.items()}
    glossary = Glossary((Term("dog", "Hund"),))
    cases = [
        TranslationOptions(beam_size=4, num_hypotheses=3, return_alignments=True),
        TranslationOptions(beam_size=1),
        TranslationOptions(beam_size=4, glossary=glossary),
        TranslationOptions(beam_size=2, format="html"),
    ]
    try:
        for options in cases:
            batch = texts if options.format == "text" else [f"<p>{t} <b>{t}</b></p>" for t in texts[:6]]
            results = {pool: t.translate_batch(batch, options).results for pool, t in translators.items()}
            for on_pool, on_rectangles in zip(results[True], results[False], strict=True):
                assert [h.text for h in on_pool.hypotheses] == [h.text for h in on_rectangles.hypotheses]
                assert (on_pool.alignment is None) == (on_rectangles.alignment is None)
        pool = translators[True]
        options = TranslationOptions(beam_size=4, num_hypotheses=2)
        together = pool.translate_batch(texts, options).results
        for text, result in zip(texts, together, strict=True):
            alone_result = pool.translate_batch([text], options).results[0]
            assert [(h.text, h.score) for h in alone_result.hypotheses] == [
                (h.text, h.score) for h in result.hypotheses
            ]
    finally:
        for translator in translators.values():
            translator.close()


@pytest.mark.parametrize(
    ("provider", "share"),
    [
        ("cpu", 1.0),
        pytest.param(
            "cuda",
            0.9,
            marks=pytest.mark.skipif(
                "CUDAExecutionProvider" not in ort.get_available_providers(), reason="onnxruntime has no CUDA provider"
            ),
        ),
    ],
)
def test_the_translator_s_light_calls_beside_a_heavy_one_take_the_express_pool(
    tiny_bundle: Path, provider: str, share: float
) -> None:
    """Through the translator: one-sentence calls made while a heavy call (its sub-batches many
    times the pool's rows) runs join the express pool, and each gets what it gets alone. On CUDA
    (float16 caches, no graphs), batchmates' rounding may turn a close call: a tenth at most."""
    from engine.api import TranslationOptions
    from engine.translator import Translator, TranslatorConfig

    words = ["a", "the", "man", "woman", "dog", "cat", "child", "red", "big", "runs", "sits", "plays", "in", "park"]
    rng = np.random.default_rng(5)
    heavy = [" ".join(rng.choice(words, int(rng.integers(10, 30)))).capitalize() + "." for _ in range(64)]
    lights = [" ".join(rng.choice(words, 5)).capitalize() + "." for _ in range(4)]
    config = TranslatorConfig(
        model_dir=tiny_bundle, provider=provider, threads=1, pool=True, pool_rows=16, max_batch_sentences=4
    )
    translator = Translator(config)
    assert translator.pools is not None
    scheduler = translator.pools[0]
    express = scheduler.express
    assert express is not None and scheduler.reserve_rows == 4  # one sentence at beam 4
    options = TranslationOptions(beam_size=4)
    joins = [0]
    original = express.join

    def counted(member: Member, source: dict[str, np.ndarray]) -> None:
        joins[0] += 1
        original(member, source)

    express.join = counted  # type: ignore[method-assign]
    try:
        expected = [translator.translate_batch([text], options).results[0].text for text in lights]
        assert joins[0] == 0  # alone, no call is heavy
        with ThreadPoolExecutor(1) as worker:
            heavy_call = worker.submit(translator.translate_batch, heavy, options)
            beside: list[str] = []
            while not heavy_call.done() or not beside:  # a heavy call that fails ends the loop too
                beside += [translator.translate_batch([text], options).results[0].text for text in lights]
            heavy_call.result()
    finally:
        translator.close()
    assert joins[0] > 0, joins
    identical = sum(text == expected[i % len(lights)] for i, text in enumerate(beside))
    assert identical >= share * len(beside), (expected, beside)
