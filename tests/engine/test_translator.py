"""The engine end to end on real bundles: engine/translator.py over onnxruntime."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from repo_root import REPO

from engine import translator as translator_module
from engine.api import TranslationOptions
from engine.bundle import BundleError, load_bundle
from engine.runner import RunnerError
from engine.translator import Translator, TranslatorConfig, auto_streams

DATA = REPO.parent / "shared" / "data" / "multi30k"
SHIPPED = REPO / "models" / "en-de"
WORDS = "a the man woman dog cat child girl boy red blue green big small old young runs sits plays on in park"
WORDS = WORDS.split()


@pytest.fixture(scope="module")
def translator(tiny_bundle: Path) -> Translator:
    return Translator(TranslatorConfig(model_dir=tiny_bundle, provider="cpu", threads=2))


def mixed_sentences(n: int, seed: int = 1, longest: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, longest))).capitalize() + "." for _ in range(n)]


def nbest(result) -> list[tuple[str, float, float]]:
    return [(h.text, h.score, h.normalized_score) for h in result.hypotheses]


def test_loads_validates_and_describes_the_bundle(translator: Translator, tiny_bundle: Path) -> None:
    info = translator.info
    assert [(lang.code, lang.tokens) for lang in info.languages.source + info.languages.target] == [
        ("en", []),
        ("de", []),
    ]
    assert (info.variant, info.provider) == ("fp32", "cpu")
    int8 = Translator(TranslatorConfig(model_dir=tiny_bundle, provider="cpu", variant="int8", warmup=False))
    assert int8.info.variant == "int8"
    assert int8.translate_batch(["A dog runs."]).results[0].text


def test_translates_the_tiny_task_in_input_order(translator: Translator, tiny_corpus: Path) -> None:
    sources = (tiny_corpus / "val.en").read_text().splitlines()[:16]
    translated = translator.translate_batch(sources, TranslationOptions(beam_size=4))
    results, stats = translated.results, translated.stats
    assert len(results) == len(sources)
    assert all(r.text and r.output_tokens > 0 and r.input_tokens > 1 for r in results)
    for i in (0, 7, 15):
        alone = translator.translate_batch([sources[i]], TranslationOptions(beam_size=4)).results[0]
        assert alone.text == results[i].text
    assert stats.encode_seconds > 0 and stats.decode_seconds > 0
    assert sum(n for n, _ in stats.sub_batches) == len(sources)


def test_sub_batches_respect_the_sentence_and_token_bounds(tiny_bundle: Path) -> None:
    small = Translator(
        TranslatorConfig(model_dir=tiny_bundle, provider="cpu", max_batch_sentences=3, max_batch_tokens=60)
    )
    texts = mixed_sentences(20, seed=3, longest=25)
    translated = small.translate_batch(texts, TranslationOptions(beam_size=2))
    results, stats = translated.results, translated.stats
    assert all(n <= 3 and (tokens <= 60 or n == 1) for n, tokens in stats.sub_batches)
    assert len(stats.sub_batches) >= 7
    one_batch = Translator(TranslatorConfig(model_dir=tiny_bundle, provider="cpu", warmup=False))
    assert [r.text for r in one_batch.translate_batch(texts, TranslationOptions(beam_size=2)).results] == [
        r.text for r in results
    ]


def test_auto_streams_are_two_on_a_multicore_cpu_and_one_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(translator_module, "available_cpus", lambda: 8)
    assert auto_streams("cpu") == 2
    monkeypatch.setattr(translator_module, "available_cpus", lambda: 1)  # e.g. a container's quota of 1 CPU
    assert auto_streams("cpu") == 1
    monkeypatch.setattr(translator_module, "available_cpus", lambda: 8)
    monkeypatch.setattr(translator_module, "resolve_provider", lambda _: "cuda")
    assert auto_streams("auto") == 1


def test_default_threads_follow_the_cpus_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(translator_module, "available_cpus", lambda: 3)
    assert TranslatorConfig(streams=2).threads_per_stream == 1
    assert TranslatorConfig(streams=2, threads=8).threads_per_stream == 4, "an explicit count is kept"
    monkeypatch.setattr(translator_module, "default_threads", lambda: 3)
    assert TranslatorConfig(streams=1).threads_per_stream == 3
    assert TranslatorConfig(streams=1, threads=2).threads_per_stream == 2


def test_streams_split_the_work_and_give_identical_results(translator: Translator, tiny_bundle: Path) -> None:
    texts = mixed_sentences(24, seed=5, longest=30)
    options = TranslationOptions(beam_size=3, num_hypotheses=2, return_alignments=True)
    config = TranslatorConfig(model_dir=tiny_bundle, provider="cpu", threads=2, streams=2, max_batch_sentences=8)
    assert config.threads_per_stream == 1
    streamed = Translator(config)
    translated = streamed.translate_batch(texts, options)
    results, stats = translated.results, translated.stats
    assert [n for n, _ in stats.sub_batches] == [8, 8, 8]
    for ours, single in zip(results, translator.translate_batch(texts, options).results, strict=True):
        assert nbest(ours) == nbest(single) and ours.alignment == single.alignment
    few = streamed.translate_batch(texts[:5], options).stats
    assert [n for n, _ in few.sub_batches] == [3, 2], "a small batch is split so that both streams work"
    streamed.close()
    with pytest.raises(ValueError, match="streams"):
        TranslatorConfig(streams=0)


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("variant", ["fp32", "int8"])
def test_a_sentence_alone_and_in_mixed_batches_gives_identical_results(
    tiny_bundle: Path, variant: str, beam: int
) -> None:
    """Every variant the manifest offers: int8 quantises activations per row, so like fp32 it
    gives each sentence the same tokens and scores whatever shares its batch."""
    assert set(load_bundle(tiny_bundle).manifest.variants) == {"fp32", "int8"}
    translator = Translator(TranslatorConfig(model_dir=tiny_bundle, provider="cpu", variant=variant, warmup=False))
    texts = mixed_sentences(64)
    options = TranslationOptions(beam_size=beam, num_hypotheses=beam)
    alone = [nbest(translator.translate_batch([text], options).results[0]) for text in texts]
    rng = random.Random(beam)
    for size in (2, 7, 23, 64):
        picked = rng.sample(range(len(texts)), size)
        batch = translator.translate_batch([texts[i] for i in picked], options).results
        assert [nbest(result) for result in batch] == [alone[i] for i in picked], f"batch of {size}"


def test_text_handling_never_raises(translator: Translator) -> None:
    texts = ["", "   \n ", "\u200b", "A dog.\n\nA cat runs.  The girl sits.\n", "a\x00b\x07 c\u2028d", "😀 " * 3]
    results = translator.translate_batch(texts).results
    assert [r.text for r in results[:3]] == ["", "", "\u200b"]  # nothing to translate: kept as it is
    assert results[0].hypotheses[0].text == "" and results[0].input_tokens == 0
    lines = results[3].text.split("\n")
    assert len(lines) == 4 and lines[0] and lines[1] == "" and lines[2] and lines[3] == ""
    assert "  " in lines[2], "the whitespace between sentences is kept"
    assert all(isinstance(r.text, str) for r in results[4:])


def test_text_longer_than_the_model_limit_is_split_and_flagged(translator: Translator) -> None:
    long_text = " ".join(WORDS[i % len(WORDS)] for i in range(400))  # ~400+ pieces, no sentence end
    result = translator.translate_batch([long_text, "A dog."]).results
    assert result[0].truncated and not result[1].truncated
    assert result[0].input_tokens > translator.max_positions
    assert result[0].text


def test_text_in_a_script_the_model_cannot_read_is_passed_through(translator: Translator) -> None:
    """Its letters are unknown pieces, a few ids for any length: the model would write a sentence
    of its own for them."""
    unreadable = ["狗在公园里跑。" * 50, "Привет, мир!", "🙂 Привет 123"]
    results = translator.translate_batch([*unreadable, "a dog 狗"], TranslationOptions()).results
    assert [r.text for r in results[:3]] == unreadable
    assert results[3].text and results[3].text != "a dog 狗", "a word it knows: translated"


def test_symbols_at_a_sentence_s_edges_are_kept_out_of_its_translation(translator: Translator) -> None:
    """Unknown pieces at its start or end could change the whole translation: they are segments of
    their own, passed through, and the words between them translate as they do alone."""
    plain = translator.translate_batch(["a dog runs ."], TranslationOptions()).results[0].text
    texts = ["😀 a dog runs .", "a dog runs . ✅", "👍🏽 🎉 a dog runs . ©"]
    results = [r.text for r in translator.translate_batch(texts, TranslationOptions()).results]
    assert results == [f"😀 {plain}", f"{plain} ✅", f"👍🏽 🎉 {plain} ©"]


def test_symbols_between_words_are_put_back_into_the_translation_of_the_words(translator: Translator) -> None:
    """The model reads the sentence without them (an unknown piece in its middle changes the whole
    translation) and each goes back once, into the translation it gives the words alone."""
    plain = translator.translate_batch(["a dog runs in the park ."], TranslationOptions()).results[0]
    texts = ["a dog ❤️ runs in the park .", "a dog🎸 runs in the park .", "a 👍🏽 dog runs 🐕 in the park ."]
    results = translator.translate_batch(texts, TranslationOptions(num_hypotheses=2)).results
    for text, result in zip(texts, results, strict=True):
        symbols = [s for s in ("❤️", "🎸", "👍🏽", "🐕") if s in text]
        for hypothesis in result.hypotheses:
            assert all(hypothesis.text.count(s) == 1 for s in symbols), (text, hypothesis.text)
        left = result.text
        for s in symbols:
            left = left.replace(s, "")
        assert left.split() == plain.text.split(), (text, result.text)
        assert result.input_tokens == plain.input_tokens


def test_a_long_address_costs_its_sentence_nothing(translator: Translator) -> None:
    """Counted, a 3,000-character URL would cut its sentence into chunks far past the model's
    positions, its letters read as sentences of their own; the model reads the words around it."""
    url = "https://example.com/" + "a" * 3000
    [result] = translator.translate_batch([f"a dog {url} runs ."], TranslationOptions()).results
    assert not result.truncated and result.text.count(url) == 1
    assert result.input_tokens < 20


def test_a_sentence_in_capitals_is_translated_as_in_sentence_case_into_capitals(translator: Translator) -> None:
    plain = translator.translate_batch(["A dog runs in the park ."], TranslationOptions()).results[0]
    texts = ["A DOG RUNS IN THE PARK .", "A DOG RUNS IN THE PARK .\nA dog runs in the park ."]
    shouted, mixed = translator.translate_batch(texts, TranslationOptions()).results
    assert shouted.text == plain.text.upper()
    assert mixed.text == f"{plain.text.upper()}\n{plain.text}", "only the sentence in capitals"


def test_n_best_hypotheses_are_ordered_and_bounded(translator: Translator) -> None:
    result = translator.translate_batch(
        ["The man plays with the dog."], TranslationOptions(beam_size=4, num_hypotheses=3)
    ).results
    scores = [h.normalized_score for h in result[0].hypotheses]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)
    assert result[0].text == result[0].hypotheses[0].text
    assert len({h.text for h in result[0].hypotheses}) > 1


def test_max_length_caps_the_output(translator: Translator) -> None:
    for beam in (1, 3):
        results = translator.translate_batch(
            mixed_sentences(5), TranslationOptions(beam_size=beam, max_length=2)
        ).results
        assert all(r.output_tokens <= 1 for r in results)  # 2 tokens including EOS


@pytest.mark.parametrize("beam", [1, 4])
def test_alignments_are_consistent_and_free_when_off(translator: Translator, beam: int) -> None:
    texts = ["The red dog runs in the park.", "A girl sits. An old man plays!"]
    with_alignment = translator.translate_batch(
        texts, TranslationOptions(beam_size=beam, return_alignments=True)
    ).results
    without = translator.translate_batch(texts, TranslationOptions(beam_size=beam)).results
    assert [nbest(r) for r in with_alignment] == [nbest(r) for r in without]
    assert all(r.alignment is None for r in without)
    for r in with_alignment:
        a = r.alignment
        weights = np.array(a.weights)
        assert weights.shape == (len(a.target_tokens), len(a.source_tokens))
        np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-6)
        assert "".join(a.target_tokens).replace("▁", " ").strip() == r.text.replace("  ", " ").strip()
        assert len(a.word_alignment) == len(a.target_words)
        assert all(0 <= s < len(a.source_words) and 0 <= t < len(a.target_words) for s, t in a.word_alignment)
    assert with_alignment[1].alignment.source_words[:2] == ["A", "girl"]


@pytest.mark.parametrize(
    "bad",
    [dict(beam_size=0), dict(beam_size=2, num_hypotheses=3), dict(max_length=0), dict(length_penalty=-1.0)],
)
def test_invalid_options_fail_before_any_work(bad: dict) -> None:
    with pytest.raises(ValueError):
        TranslationOptions(**bad)


def test_omitted_options_are_the_manifest_decoding_defaults(tiny_bundle: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["decoding"].update(beam_size=2, length_penalty=0.5)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    translator = Translator(TranslatorConfig(model_dir=bundle, provider="cpu", warmup=False))
    texts = mixed_sentences(8, seed=7)
    explicit = TranslationOptions(beam_size=2, length_penalty=0.5, num_hypotheses=2)
    assert nbest_all(translator, texts, TranslationOptions(num_hypotheses=2)) == nbest_all(translator, texts, explicit)
    assert nbest_all(translator, texts, TranslationOptions(num_hypotheses=2)) != nbest_all(
        translator, texts, TranslationOptions(beam_size=4, length_penalty=1.0, num_hypotheses=2)
    )
    # More hypotheses than the default beam: the beam widens to hold them.
    wider = TranslationOptions(num_hypotheses=3, length_penalty=0.5)
    assert nbest_all(translator, texts, wider) == nbest_all(translator, texts, replace(wider, beam_size=3))
    with pytest.raises(ValueError, match="beam_size=2"):
        translator.translate_batch(texts, TranslationOptions(beam_size=2, num_hypotheses=3))


def nbest_all(translator: Translator, texts: list[str], options: TranslationOptions) -> list:
    return [nbest(r) for r in translator.translate_batch(texts, options).results]


def test_bundle_problems_are_clear_errors(tiny_bundle: Path, tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="does not exist"):
        Translator(TranslatorConfig(model_dir=tmp_path / "nothing"))
    with pytest.raises(BundleError, match="no variant 'int4'"):
        Translator(TranslatorConfig(model_dir=tiny_bundle, provider="cpu", variant="int4"))


@pytest.mark.skipif("CUDAExecutionProvider" in __import__("onnxruntime").get_available_providers(), reason="has CUDA")
def test_cuda_requested_without_cuda_is_a_clear_error(tiny_bundle: Path) -> None:
    with pytest.raises(RunnerError, match="onnxruntime-gpu"):
        Translator(TranslatorConfig(model_dir=tiny_bundle, provider="cuda"))


def test_the_engine_does_not_import_torch() -> None:
    code = "import sys, engine.translator; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ---------------------------------------------------------------------------------------------
# Same outputs as the PyTorch reference decoding (model/decoding.py)
# ---------------------------------------------------------------------------------------------


def reference_translations(checkpoint: Path, texts: list[str], beam: int, length_penalty: float) -> list[str]:
    torch = pytest.importorskip("torch")
    from engine.tokenizer import Tokenizer
    from export.parity import one_torch_thread
    from model.checkpoint import load_checkpoint, model_from_checkpoint
    from model.data import pad
    from model.decoding import DecodingOptions, beam_search

    state = load_checkpoint(checkpoint)
    model = model_from_checkpoint(state)
    spm = checkpoint.parent / f"{checkpoint.stem}.spm.model"
    spm.write_bytes(state["spm_model"])
    tokenizer = Tokenizer(spm)
    options = DecodingOptions(
        beam_size=beam, length_penalty=length_penalty, max_length=model.config.max_positions
    )  # max_length_a/b: the defaults, as in the manifests the exporter writes
    out = []
    # One thread: a multi-threaded matmul may sum in another order on a loaded many-core machine,
    # and the tiny model's near-ties then break the other way.
    for start in range(0, len(texts), 32):
        with torch.no_grad(), one_torch_thread():
            hyps = beam_search(model, pad(tokenizer.encode_batch(texts[start : start + 32])), options)
        out += [tokenizer.decode(h[0].tokens) for h in hyps]
    return out


def assert_same_as_reference(
    bundle: Path, checkpoint: Path, texts: list[str], tmp_path: Path, settings: tuple[tuple[int, float], ...]
) -> None:
    """Identical best translations for each (beam size, length penalty) in ``settings``."""
    translator = Translator(TranslatorConfig(model_dir=bundle, provider="cpu", variant="fp32"))
    decoding = translator.manifest.decoding
    assert (decoding.max_length_a, decoding.max_length_b) == (1.5, 10), "reference runs with the default a, b"
    local = tmp_path / checkpoint.name
    local.symlink_to(checkpoint)
    for beam, alpha in settings:
        # The repetition guard is the engine's own addition: off, as the reference has none.
        options = TranslationOptions(beam_size=beam, length_penalty=alpha, max_consecutive_repeats=0)
        ours = [r.text for r in translator.translate_batch(texts, options).results]
        expected = reference_translations(local, texts, beam, alpha)
        mismatches = [(t, o, e) for t, o, e in zip(texts, ours, expected, strict=True) if o != e]
        assert not mismatches, f"beam {beam}: {len(mismatches)} of {len(texts)} differ, e.g. {mismatches[:2]}"


def single_sentences(texts: list[str]) -> list[str]:
    """Texts the segmenter keeps whole (the reference translates lines as they are)."""
    from engine.segmenter import segment

    return [t for t in texts if len(segment(t, count_tokens=len, max_tokens=10**6).segments) == 1]


def test_same_outputs_as_the_pytorch_reference_on_the_tiny_model(
    tiny_bundle: Path, tiny_checkpoint: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    texts = single_sentences((tiny_corpus / "val.en").read_text().splitlines())
    assert len(texts) == 64
    assert_same_as_reference(tiny_bundle, tiny_checkpoint, texts, tmp_path, ((1, 1.0), (4, 1.0), (5, 0.6)))


@pytest.mark.skipif(not (DATA / "val.en").is_file(), reason=f"Multi30K data not found at {DATA}")
@pytest.mark.skipif(
    not (SHIPPED / "checkpoint.pt").is_file() or not (SHIPPED / "bundle" / "manifest.json").is_file(),
    reason=f"shipped model not found ({SHIPPED}/checkpoint.pt and {SHIPPED}/bundle)",
)
def test_same_outputs_as_the_pytorch_reference_on_200_val_sentences_with_the_shipped_model(tmp_path: Path) -> None:
    texts = single_sentences((DATA / "val.en").read_text(encoding="utf-8").splitlines())[:200]
    assert_same_as_reference(SHIPPED / "bundle", SHIPPED / "checkpoint.pt", texts, tmp_path, ((1, 1.0), (4, 1.0)))
