"""The onnxruntime runner (engine/runner.py): provider choice and the two rectangle decoder states
(the exported step, whose cache is one rectangle; the row pool is tests/engine/test_pool.py's).

The IO-binding path (``DeviceDecoder``) exists for CUDA; it runs here on the CPU device, with the
decoder graph as CUDA loads it (``engine.step_rows``), and must give bitwise the same results as the
plain numpy path. tests/engine/test_cuda.py runs it on a GPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from search_helpers import ForceFirstToken

from engine.beam_search import SearchOptions, search
from engine.bundle import BundleError, check_graph, load_bundle
from engine.forced_decoding import Forced, score
from engine.runner import (
    DecoderShape,
    DeviceDecoder,
    HostDecoder,
    Runner,
    RunnerConfig,
    RunnerError,
    decoder_graph,
    load_session,
    pad_batch,
    resolve_provider,
)
from engine.step_rows import with_row_inputs


@pytest.fixture(scope="module")
def runner(tiny_bundle: Path) -> Runner:
    bundle = load_bundle(tiny_bundle)
    d = bundle.manifest.dimensions
    shape = DecoderShape(d.decoder_layers, d.heads, d.d_head, d.vocab_size)
    return Runner(*bundle.graph_paths("fp32"), shape, RunnerConfig(provider="cpu", threads=1, pool=False))


def cuda_style_session(decoder: Path, *, shortlist: bool = False) -> ort.InferenceSession:
    """The decoder graph as the CUDA path loads it (with its row inputs), in a CPU session."""
    graph = decoder_graph(decoder, shortlist=shortlist, cuda=True)
    return load_session(decoder, "cpu", RunnerConfig(provider="cpu", threads=1), graph)


@pytest.fixture(scope="module")
def device_session(tiny_bundle: Path) -> ort.InferenceSession:
    return cuda_style_session(load_bundle(tiny_bundle).graph_paths("fp32")[1])


def test_provider_resolution() -> None:
    assert resolve_provider("cpu") == "cpu"
    has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    assert resolve_provider("auto") == ("cuda" if has_cuda else "cpu")
    if not has_cuda:
        with pytest.raises(RunnerError, match="onnxruntime-gpu"):
            resolve_provider("cuda")
    with pytest.raises(RunnerError, match="provider must be"):
        RunnerConfig(provider="tpu")  # type: ignore[arg-type]
    with pytest.raises(RunnerError, match="threads"):
        RunnerConfig(threads=-1)


def test_unloadable_graph_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a graph")
    with pytest.raises(RunnerError, match="cannot load"):
        Runner(broken, broken, DecoderShape(1, 1, 1, 1), RunnerConfig(provider="cpu"))


def sources() -> np.ndarray:
    return pad_batch([[10, 11, 12, 13, 3], [20, 3], [30, 31, 32, 3]], 0)


@pytest.mark.parametrize("beam", [1, 3])
def test_io_binding_path_equals_the_host_path(runner: Runner, device_session: ort.InferenceSession, beam: int) -> None:
    encoded = runner.encode(sources())
    host = HostDecoder(runner.decoder, encoded, runner.shape, alignments=True)
    bound = DeviceDecoder(device_session, encoded, runner.shape, alignments=True, device_id=0, device="cpu")
    options = SearchOptions(beam_size=beam, num_hypotheses=beam, return_alignments=True)
    for_host = search(host, [9, 2, 7], options, bos_id=2, eos_id=3)
    for_bound = search(bound, [9, 2, 7], options, bos_id=2, eos_id=3)
    for a, b in zip(for_host, for_bound, strict=True):
        assert [(h.tokens, h.score) for h in a] == [(h.tokens, h.score) for h in b]
        for ha, hb in zip(a, b, strict=True):
            np.testing.assert_array_equal(ha.attention, hb.attention)


@pytest.mark.parametrize("beam", [1, 3])
def test_an_extra_rule_steers_the_search_over_the_onnx_decoder(runner: Runner, beam: int) -> None:
    encoded = runner.encode(sources())
    options = SearchOptions(beam_size=beam, num_hypotheses=beam)

    def run(rules: list[ForceFirstToken]) -> list[list[int]]:
        decoder = HostDecoder(runner.decoder, encoded, runner.shape, alignments=False)
        results = search(decoder, [9, 2, 7], options, bos_id=2, eos_id=3, extra_rules=rules)
        return [h.tokens for hyps in results for h in hyps]

    first_tokens = {tokens[0] for tokens in run([]) if tokens}
    token = min(set(range(4, runner.shape.vocab)) - first_tokens)
    assert {tokens[0] for tokens in run([ForceFirstToken(token)])} == {token}


def test_select_reorders_rows_and_drops_sentences(runner: Runner) -> None:
    encoded = runner.encode(sources())
    decoder = HostDecoder(runner.decoder, encoded, runner.shape, alignments=False)
    decoder.step(np.full(3, 2), 1)
    decoder.select(np.array([0, 0, 1, 1, 2, 2]), None)  # two beams per sentence
    decoder.step(np.array([5, 6, 7, 8, 9, 10]), 1)
    cache = decoder.cache
    decoder.select(np.array([0, 1, 5, 4]), np.array([0, 2]))  # sentence 1 finished; beams of 2 swapped
    assert decoder.cache.keys() == cache.keys() and len(cache) == 2 * runner.shape.layers
    for name, value in cache.items():
        np.testing.assert_array_equal(decoder.cache[name], value[[0, 1, 5, 4]])
    assert decoder.source.keys() == encoded.source.keys()
    for name, value in encoded.source.items():
        np.testing.assert_array_equal(decoder.source[name], value[[0, 2]])
    same = decoder.cache
    decoder.select(np.arange(4), None)
    assert decoder.cache is same, "the identity reordering must not copy the cache"
    out = decoder.step(np.array([5, 6, 7, 8]), 3)
    assert out.log_probs.shape == (4, runner.decoder.get_outputs()[0].shape[1]) and out.attention is None
    assert out.top_ids.shape == out.top_log_probs.shape == (4, 3)
    np.testing.assert_array_equal(out.top_ids[:, 0], out.log_probs.argmax(axis=1))


@pytest.mark.parametrize("device", [False, True])
def test_step_without_full_log_probs_leaves_them_out(
    runner: Runner, device_session: ort.InferenceSession, device: bool
) -> None:
    encoded = runner.encode(sources())

    def start() -> HostDecoder | DeviceDecoder:
        if device:
            return DeviceDecoder(device_session, encoded, runner.shape, alignments=True, device_id=0, device="cpu")
        return HostDecoder(runner.decoder, encoded, runner.shape, alignments=True)

    full, lean = start(), start()
    for tokens in (np.full(3, 2), np.array([5, 6, 7])):
        a, b = full.step(tokens, 4), lean.step(tokens, 4, full=False)
        assert a.log_probs is not None and b.log_probs is None
        for x, y in ((a.top_log_probs, b.top_log_probs), (a.top_ids, b.top_ids), (a.attention, b.attention)):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(np.take_along_axis(a.log_probs, a.top_ids, axis=1), a.top_log_probs)


def runner_of(bundle_dir: Path, variant: str, *, shortlist: bool) -> Runner:
    bundle = load_bundle(bundle_dir)
    d = bundle.manifest.dimensions
    shape = DecoderShape(d.decoder_layers, d.heads, d.d_head, d.vocab_size)
    config = RunnerConfig(provider="cpu", threads=1, pool=False)
    return Runner(*bundle.graph_paths(variant), shape, config, shortlist=shortlist)


def two_steps(
    bundle_dir: Path, variant: str, *, shortlist: bool, device: bool, vocab_ids: np.ndarray | None = None
) -> list:
    runner = runner_of(bundle_dir, variant, shortlist=shortlist)
    encoded = runner.encode(sources())
    state = dict(alignments=True, vocab_ids=vocab_ids)
    if device:
        session = cuda_style_session(load_bundle(bundle_dir).graph_paths(variant)[1], shortlist=shortlist)
        decoder = DeviceDecoder(session, encoded, runner.shape, **state, device_id=0, device="cpu")
    else:
        decoder = HostDecoder(runner.decoder, encoded, runner.shape, **state)
    return [decoder.step(tokens, 4) for tokens in (np.full(3, 2), np.array([5, 6, 7]))]


@pytest.mark.parametrize("variant", ["fp32", "int8"])
@pytest.mark.parametrize("device", [False, True])
def test_the_shortlist_graph_given_all_ids_steps_as_the_exported_one(
    tiny_bundle: Path, variant: str, device: bool
) -> None:
    exported = two_steps(tiny_bundle, variant, shortlist=False, device=device)
    assert "vocab_ids" in {i.name for i in runner_of(tiny_bundle, variant, shortlist=True).decoder.get_inputs()}
    for a, b in zip(exported, two_steps(tiny_bundle, variant, shortlist=True, device=device), strict=True):
        for x, y in ((a.log_probs, b.log_probs), (a.top_ids, b.top_ids), (a.top_log_probs, b.top_log_probs)):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("variant", ["fp32", "int8"])
@pytest.mark.parametrize("device", [False, True])
def test_a_shortlist_scores_its_pieces_only(tiny_bundle: Path, variant: str, device: bool) -> None:
    ids = np.array([3, 5, 17, 40, 41, 90, 120])
    full = two_steps(tiny_bundle, variant, shortlist=False, device=device)
    short = two_steps(tiny_bundle, variant, shortlist=True, device=device, vocab_ids=ids)
    for a, b in zip(full, short, strict=True):
        outside = np.setdiff1d(np.arange(a.log_probs.shape[1]), ids)
        assert b.log_probs.shape == a.log_probs.shape and np.all(b.log_probs[:, outside] == -np.inf)
        renormalised = a.log_probs[:, ids] - np.log(np.exp(a.log_probs[:, ids]).sum(axis=1, keepdims=True))
        np.testing.assert_allclose(b.log_probs[:, ids], renormalised, atol=1e-5)
        np.testing.assert_array_equal(b.top_ids, ids[np.argsort(-b.log_probs[:, ids], axis=1, kind="stable")[:, :4]])
        np.testing.assert_array_equal(np.take_along_axis(b.log_probs, b.top_ids, axis=1), b.top_log_probs)


def test_a_shortlist_needs_the_graph_input(runner: Runner) -> None:
    with pytest.raises(RunnerError, match="shortlist=True"):
        runner.start(runner.encode(sources()), alignments=False, vocab_ids=np.array([3, 5]))


@pytest.mark.parametrize("device", [False, True])
def test_forced_translations_score_as_the_search_scored_them_on_both_paths(
    runner: Runner, device_session: ort.InferenceSession, device: bool
) -> None:
    """Teacher forcing (engine.forced_decoding) through real decoder states: several translations
    of one sentence take a row each (the empty cache and the source copied row by row)."""
    encoded = runner.encode(sources())

    def start() -> HostDecoder | DeviceDecoder:
        if device:
            return DeviceDecoder(device_session, encoded, runner.shape, alignments=True, device_id=0, device="cpu")
        return HostDecoder(runner.decoder, encoded, runner.shape, alignments=True)

    options = SearchOptions(beam_size=3, num_hypotheses=3, return_alignments=True)
    found = search(start(), [9, 4, 7], options, bos_id=2, eos_id=3)
    given = [[Forced(tuple(h.tokens), h.eos) for h in hyps] for hyps in found]
    scored = score(start(), given, bos_id=2, eos_id=3, prefix_length=0, length_penalty=options.length_penalty)
    for searched, forced in zip((h for s in found for h in s), (h for s in scored for h in s), strict=True):
        assert forced.tokens == searched.tokens
        assert forced.score == pytest.approx(searched.score, abs=1e-4)
        np.testing.assert_allclose(forced.attention, searched.attention, atol=1e-5)


def test_the_device_path_reorders_as_the_host_path_over_composed_selects(
    runner: Runner, device_session: ort.InferenceSession
) -> None:
    """The device state's next step gathers its cache and source by the rows and sentences of every
    select since the last step, composed; the host state takes them one select at a time."""
    encoded = runner.encode(sources())
    host = HostDecoder(runner.decoder, encoded, runner.shape, alignments=True)
    bound = DeviceDecoder(device_session, encoded, runner.shape, alignments=True, device_id=0, device="cpu")
    for decoder in (host, bound):
        decoder.step(np.full(3, 2), 2)
        decoder.select(np.array([0, 0, 1, 1, 2, 2]), None)
        decoder.step(np.array([5, 6, 7, 8, 9, 10]), 2)
        decoder.select(np.array([1, 0, 5, 4]), np.array([0, 2]))  # sentence 1 finished
        decoder.select(np.array([1, 0, 3, 2]), None)  # and each sentence's beams swapped, before a step
    steps = [(host.step(np.array([4, 5, 6, 7]), 3), bound.step(np.array([4, 5, 6, 7]), 3))]
    for decoder in (host, bound):
        decoder.select(np.array([3, 2]), np.array([1]))  # then sentence 0: sentence 2 of the batch is left
    steps.append((host.step(np.array([8, 9]), 3), bound.step(np.array([8, 9]), 3)))
    for a, b in steps:
        for x, y in ((a.log_probs, b.log_probs), (a.top_ids, b.top_ids), (a.attention, b.attention)):
            np.testing.assert_array_equal(x, y)


def test_the_device_path_needs_the_graph_that_reorders_its_cache(runner: Runner, tiny_bundle: Path) -> None:
    with pytest.raises(RunnerError, match="step_rows"):
        DeviceDecoder(
            runner.decoder, runner.encode(sources()), runner.shape, alignments=False, device_id=0, device="cpu"
        )
    model = onnx.load(str(load_bundle(tiny_bundle).graph_paths("fp32")[1]))
    assert with_row_inputs(model) and not with_row_inputs(model), "added once"
    gathered = 2 * runner.shape.layers + 2 * runner.shape.layers + 1  # self caches; cross keys, values, mask
    assert [node.op_type for node in model.graph.node[:gathered]] == ["Gather"] * gathered


def test_the_bundle_check_takes_the_decoder_as_the_cuda_path_loads_it(
    tiny_bundle: Path, device_session: ort.InferenceSession
) -> None:
    manifest = load_bundle(tiny_bundle).manifest
    check_graph(device_session, "decoder", manifest, where="decoder with row inputs")
    with pytest.raises(BundleError, match="inputs are"):
        check_graph(device_session, "encoder", manifest, where="not an encoder")
