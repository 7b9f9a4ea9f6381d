"""The row pool at fixed shapes (engine/captured_step.py), as CUDA graphs need them, on the CPU.

Capturing needs a GPU (tests/engine/test_cuda.py); everything else runs here: rows, slots and
queries padded to a few shapes, inputs written into buffers bound once, blocks that only grow. A
pool of fixed shapes must decode bit for bit as the plain pool, through the same joins, leaving,
reordering and growth.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_pool import BOS, EOS, member, run, runner_for, same, searched, sentences

from engine import captured_step, forced_decoding
from engine.captured_step import MIN_PLACES, bucket, power_of_two
from engine.forced_decoding import Forced
from engine.pool import PoolConfig, RowPool
from engine.pool_storage import DeviceStorage, HostStorage, address
from engine.runner import Runner, RunnerConfig, decoder_graph, load_session


@pytest.fixture(scope="module")
def pooled(tiny_bundle: Path) -> Runner:
    return runner_for(tiny_bundle, pool=True)


def test_shapes_are_powers_of_two_within_the_allocation() -> None:
    assert [bucket(n, 128) for n in (1, 8, 9, 16, 17, 100, 128)] == [MIN_PLACES, 8, 16, 16, 32, 128, 128]
    assert bucket(100, 96) == 96  # never past what is allocated
    assert [power_of_two(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 4, 4, 8]


def joins(pooled: Runner, beam: int, results: dict[int, list]) -> dict[int, list]:
    """Four searches joining a running pool at steps 0, 2, 5 and 6: one with a source wider than
    the others (a wider block of slots), the last pushing the rows past the pool's 16."""
    batches = [sentences(5, 1), sentences(3, 2, longest=60), sentences(6, 3, longest=8), sentences(9, 4)]
    return {
        at: [member(pooled, ids, searched(ids, beam, alignments=True), results[i], alignments=True)]
        for i, (at, ids) in enumerate(zip((0, 2, 5, 6), batches, strict=True))
    }


@pytest.mark.parametrize("storage", ["host", "device"])
@pytest.mark.parametrize("beam", [1, 4])
def test_a_pool_of_fixed_shapes_decodes_bitwise_as_the_plain_pool(pooled: Runner, beam: int, storage: str) -> None:
    """Hypotheses, scores and attention bit for bit, with the blocks in the host's memory and in
    OrtValues (the CUDA pool's storage, on the CPU's device)."""
    got = {}
    for fixed in (False, True):
        results: dict[int, list] = {i: [] for i in range(4)}
        blocks = HostStorage() if storage == "host" else DeviceStorage("cpu")
        pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16, fixed_shapes=fixed), blocks)
        run(pool, joins(pooled, beam, results))
        assert pool.rows_held == 0 and pool.n_slots == 0
        got[fixed] = [results[i][0] for i in range(4)]
    for plain, fixed_shapes in zip(got[False], got[True], strict=True):
        assert same(plain, fixed_shapes)


def test_fixed_shapes_are_few_and_their_blocks_only_grow(pooled: Runner) -> None:
    """Steps of every row count from 1 to 36 run at a handful of shapes; the blocks are allocated
    at the configured rows from the start, grow when a search needs more and never shrink, so
    the captured steps stay bound to memory that is there."""
    pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16, fixed_shapes=True))
    assert len(pool.lengths) == 16 and len(pool.slot_owner) == 16
    first = address(pool.cache)
    results: dict[int, list] = {i: [] for i in range(4)}
    run(pool, joins(pooled, 4, results))
    assert pool.captured is not None
    shapes = pool.captured.shapes
    assert 4 <= len(shapes) <= 16  # a shape for each of the blocks' sizes, not for each of 36 row counts
    assert all(n == power_of_two(n) and n >= MIN_PLACES for rows, slots, _ in shapes for n in (rows, slots))
    assert len(pool.lengths) >= 32 and address(pool.cache) != first  # grew for the last search
    grown = (address(pool.cache), pool.source_width)
    pool.release()
    small, narrow = sentences(2, 9, longest=5), []  # a narrow search after them keeps the grown blocks
    run(pool, {0: [member(pooled, small, searched(small, 4), narrow)]})
    assert (address(pool.cache), pool.source_width) == grown
    assert pool.source_width == power_of_two(pool.source_width)


def test_past_the_most_shapes_a_step_runs_uncaptured(pooled: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Captured graphs are never released, so at most ``MAX_SHAPES`` are kept; a step of another
    shape runs without one and decodes as the rest."""
    monkeypatch.setattr(captured_step, "MAX_SHAPES", 2)
    got = {}
    for fixed in (False, True):
        results: dict[int, list] = {i: [] for i in range(4)}
        pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16, fixed_shapes=fixed))
        run(pool, joins(pooled, 4, results))
        got[fixed] = [results[i][0] for i in range(4)]
    assert pool.captured is not None and len(pool.captured.shapes) == 2
    for plain, fixed_shapes in zip(got[False], got[True], strict=True):
        assert same(plain, fixed_shapes)


def test_forced_decoding_at_fixed_shapes_scores_as_the_plain_pool(pooled: Runner) -> None:
    """Several translations of one sentence read its one slot (more queries a slot than beams)."""
    ids = sentences(2, 5)
    translations = [[Forced((5, 6, 7)), Forced((8, 9), eos=False), Forced(())], [Forced((10, 11, 12, 13))]]
    scores = {}
    for fixed in (False, True):
        results: list = []
        pool = RowPool(pooled.decoder, pooled.shape, PoolConfig(rows=16, fixed_shapes=fixed))
        steps = forced_decoding.score_steps(translations, bos_id=BOS, eos_id=EOS, prefix_length=0, length_penalty=1.0)
        run(pool, {0: [member(pooled, ids, steps, results)]})
        scores[fixed] = results[0]
    assert scores[True] == scores[False]


def test_a_pool_of_fixed_shapes_refuses_a_step_with_a_shortlist(tiny_bundle: Path, pooled: Runner) -> None:
    path = tiny_bundle / "decoder.onnx"
    graph = decoder_graph(path, shortlist=True, pool=True)
    session = load_session(path, "cpu", RunnerConfig(provider="cpu", threads=1), graph)
    with pytest.raises(ValueError, match="without a shortlist"):
        RowPool(session, pooled.shape, PoolConfig(fixed_shapes=True))


def test_the_step_cuda_captures_runs_at_fixed_shapes_on_the_cpu(tiny_bundle: Path, pooled: Runner) -> None:
    """The step CUDA loads (float16 caches), at fixed shapes, blocks in OrtValues: as the plain
    float16 pool, bit for bit."""
    path = tiny_bundle / "decoder.onnx"
    graph = decoder_graph(path, shortlist=False, cuda=True, pool=True)
    session = load_session(path, "cpu", RunnerConfig(provider="cpu", threads=1), graph)
    ids = sentences(12, 6)
    got = {}
    for fixed in (False, True):
        results: list = []
        pool = RowPool(session, pooled.shape, PoolConfig(rows=32, fixed_shapes=fixed), DeviceStorage("cpu"))
        run(pool, {0: [member(pooled, ids, searched(ids, 4), results)]})
        got[fixed] = results[0]
    assert same(got[False], got[True])
    assert np.isfinite([h.score for hyps in got[True] for h in hyps]).all()


def test_the_translator_with_cuda_graphs_translates_as_the_plain_pool(tiny_bundle: Path) -> None:
    """``TranslatorConfig.cuda_graphs`` on the CPU (fixed shapes, nothing captured): alternatives,
    alignments, a glossary and markup, and calls from several threads joining one pool: the same
    texts and scores as the plain pool's."""
    import threading

    from engine.api import TranslationOptions
    from engine.glossary import Glossary, Term
    from engine.translator import Translator, TranslatorConfig

    words = ["a", "the", "man", "woman", "dog", "cat", "child", "red", "big", "runs", "sits", "plays", "in", "park"]
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(words, int(rng.integers(1, 30)))).capitalize() + "." for _ in range(24)]
    translators = {
        graphs: Translator(
            TranslatorConfig(model_dir=tiny_bundle, provider="cpu", threads=1, pool=True, cuda_graphs=graphs)
        )
        for graphs in (False, True)
    }
    cases = [
        TranslationOptions(beam_size=4, num_hypotheses=3, return_alignments=True),
        TranslationOptions(beam_size=1),
        TranslationOptions(beam_size=4, glossary=Glossary((Term("dog", "Hund"),))),
        TranslationOptions(beam_size=2, format="html"),
    ]

    def translated(translator: Translator, batch: list[str], options: TranslationOptions) -> list:
        return [[(h.text, h.score) for h in r.hypotheses] for r in translator.translate_batch(batch, options).results]

    try:
        for options in cases:
            batch = texts if options.format == "text" else [f"<p>{t} <b>{t}</b></p>" for t in texts[:6]]
            assert translated(translators[True], batch, options) == translated(translators[False], batch, options)
        options = TranslationOptions(beam_size=4)
        expected = [translated(translators[False], [text], options) for text in texts]
        got: dict[int, list] = {}

        def call(i: int) -> None:
            got[i] = translated(translators[True], [texts[i]], options)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(texts))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [got[i] for i in range(len(texts))] == expected
        pool = translators[True].pools[0].pool  # type: ignore[index]
        assert pool.captured is not None and pool.captured.shapes
    finally:
        for translator in translators.values():
            translator.close()


def test_cuda_graphs_need_the_pool(tiny_bundle: Path) -> None:
    from engine.translator import TranslatorConfig

    with pytest.raises(ValueError, match="needs pool"):
        TranslatorConfig(model_dir=tiny_bundle, cuda_graphs=True)
