"""The CUDA path (onnxruntime-gpu's CUDA provider, ``DeviceDecoder``) on a GPU.

Skipped where onnxruntime has no CUDA provider, as in CI; it runs wherever onnxruntime-gpu is
installed. A CUDA provider that is installed but cannot start is a failure, not a skip. Float32 on
the GPU is not bitwise float32 on the CPU (other kernels, other summation orders), so CPU and GPU
are held to the same translations for nearly all sentences and to scores within a tolerance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from repo_root import REPO

from engine.api import TranslationOptions
from engine.runner import DeviceDecoder
from engine.translator import Translator, TranslatorConfig

pytestmark = pytest.mark.skipif(
    "CUDAExecutionProvider" not in ort.get_available_providers(), reason="onnxruntime has no CUDA provider here"
)

SENTENCES = [
    "a dog runs in the park .",
    "the small girl plays with a red ball .",
    "a man sits under a tree .",
    "two women walk along the beach while a boy throws a stick for the dog .",
    "a",
    "people .",
]
SHIPPED = REPO / "models" / "en-de" / "bundle"
SHIPPED_SENTENCES = [
    "A man in an orange hat starring at something.",
    "A Boston Terrier is running on lush green grass in front of a white fence.",
    "A girl in karate uniform breaking a stick with a front kick.",
    "Five people wearing winter jackets and helmets stand in the snow, with snowmobiles in the background.",
    "People are fixing the roof of a house.",
    "A man in light colored clothing photographs a group of men wearing dark suits and hats.",
    "A group of people standing in front of an igloo.",
    "A boy in a red uniform is attempting to avoid getting out at home plate.",
    "A guy works on a building.",
    "A man in a vest is sitting in a chair and holding magazines.",
    "A mother and her young song enjoying a beautiful day outside.",
    "Men playing volleyball, with one player missing the ball but hands still in the air.",
    "A woman holding a bowl of food in a kitchen.",
    "A man is leaning against a pole surrounded by people.",
    "A woman with a large purse is walking by a gate.",
    "Two children sit on a small seesaw in the sand.",
]


def pair(bundle: Path, variant: str) -> tuple[Translator, Translator]:
    cpu = Translator(TranslatorConfig(model_dir=bundle, provider="cpu", variant=variant))
    cuda = Translator(TranslatorConfig(model_dir=bundle, provider="cuda", variant=variant))
    assert cuda.info.provider == "cuda" and "CUDAExecutionProvider" in cuda.runner.decoder.get_providers()
    return cpu, cuda


def assert_same_translations(
    cpu: Translator,
    cuda: Translator,
    texts: list[str],
    options: TranslationOptions,
    *,
    share: float = 0.9,
    tolerance: float = 1e-2,
) -> None:
    """At least ``share`` of the translations identical, and their scores and alignments within
    ``tolerance``: other kernels' rounding may change a close call between candidates, no more."""
    on_cpu = cpu.translate_batch(texts, options).results
    on_gpu = cuda.translate_batch(texts, options).results
    same = [a.text == b.text for a, b in zip(on_cpu, on_gpu, strict=True)]
    assert sum(same) >= share * len(texts), [(a.text, b.text) for a, b in zip(on_cpu, on_gpu, strict=True)]
    for a, b, equal in zip(on_cpu, on_gpu, same, strict=True):
        if equal:
            assert b.hypotheses[0].score == pytest.approx(a.hypotheses[0].score, abs=tolerance)
            if options.return_alignments:
                np.testing.assert_allclose(b.alignment.weights, a.alignment.weights, atol=tolerance)


@pytest.mark.parametrize("variant", ["fp32", "int8"])
@pytest.mark.parametrize("beam", [1, 4])
def test_tiny_model_translates_on_the_gpu_as_on_the_cpu(tiny_bundle: Path, variant: str, beam: int) -> None:
    cpu, cuda = pair(tiny_bundle, variant)
    options = TranslationOptions(beam_size=beam, num_hypotheses=min(beam, 2), return_alignments=True)
    assert_same_translations(cpu, cuda, SENTENCES * 4, options)


def test_cache_and_source_stay_on_the_device(tiny_bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search reorders rows and drops finished sentences: the step picks them by index, and the
    cache and source stay OrtValues on the GPU throughout."""
    _, cuda = pair(tiny_bundle, "fp32")
    devices = []
    select = DeviceDecoder.select

    def recording(self: DeviceDecoder, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        select(self, rows, sentences)
        devices.extend(value.device_name().lower() for value in (*self.cache.values(), *self.source.values()))

    monkeypatch.setattr(DeviceDecoder, "select", recording)
    cuda.translate_batch(SENTENCES, TranslationOptions(beam_size=4))
    assert devices and set(devices) == {"cuda"}


@pytest.mark.parametrize("shortlist", [False, True])
def test_shipped_model_on_the_gpu(shortlist: bool) -> None:
    cpu, cuda = pair(SHIPPED, "fp32")
    assert_same_translations(cpu, cuda, SHIPPED_SENTENCES, TranslationOptions(beam_size=4, shortlist=shortlist))


@pytest.mark.parametrize("bundle", ["tiny", "shipped"])
def test_the_row_pool_on_the_gpu_translates_as_on_the_cpu(tiny_bundle: Path, bundle: str) -> None:
    """The row pool on CUDA (float16 caches in device blocks, ``engine.pool_storage``): sentences
    joining and leaving, beams reordered, a shortlist, alignments: as the CPU's pool within
    float16's rounding, its blocks on the GPU throughout."""
    path, texts = (tiny_bundle, SENTENCES * 4) if bundle == "tiny" else (SHIPPED, SHIPPED_SENTENCES)
    cpu = Translator(TranslatorConfig(model_dir=path, provider="cpu", pool=True))
    cuda = Translator(TranslatorConfig(model_dir=path, provider="cuda", pool=True))
    assert cuda.pools is not None and "CUDAExecutionProvider" in cuda.runner.decoder.get_providers()
    for options in (TranslationOptions(beam_size=4, return_alignments=True), TranslationOptions(beam_size=1)):
        assert_same_translations(cpu, cuda, texts, options)
    if bundle == "shipped":
        assert_same_translations(cpu, cuda, texts, TranslationOptions(beam_size=4, shortlist=True))
    pool = cuda.pools[0].pool
    assert {pool.cache.value.device_name().lower(), pool.cross.value.device_name().lower()} == {"cuda"}


@pytest.mark.parametrize("bundle", ["tiny", "shipped"])
def test_the_row_pool_captured_as_cuda_graphs_translates_as_without(tiny_bundle: Path, bundle: str) -> None:
    """The pool's step at fixed shapes, captured as CUDA graphs and replayed
    (``engine.captured_step``): the translations of the CUDA pool without graphs, and a second
    pass over the same texts, replays of the graphs the first captured, gives the first's."""
    path, texts = (tiny_bundle, SENTENCES * 4) if bundle == "tiny" else (SHIPPED, SHIPPED_SENTENCES)
    plain = Translator(TranslatorConfig(model_dir=path, provider="cuda", pool=True))
    graphs = Translator(TranslatorConfig(model_dir=path, provider="cuda", pool=True, cuda_graphs=True))
    options = graphs.runner.decoder.get_provider_options()["CUDAExecutionProvider"]
    assert options["enable_cuda_graph"] == "1"
    for wanted in (
        TranslationOptions(beam_size=4, return_alignments=True, shortlist=False),
        TranslationOptions(beam_size=1, shortlist=False),
    ):
        assert_same_translations(plain, graphs, texts, wanted)
        first, again = (graphs.translate_batch(texts, wanted).results for _ in range(2))
        assert [r.text for r in again] == [r.text for r in first]
        np.testing.assert_allclose([r.hypotheses[0].score for r in again], [r.hypotheses[0].score for r in first])
    assert graphs.pools is not None
    captured = graphs.pools[0].pool.captured
    assert captured is not None and captured.shapes


def test_the_captured_pool_grows_past_its_rows_and_translates_as_without(tiny_bundle: Path) -> None:
    """Searches larger than the captured pool's configured rows (8 sentences at beam 4, a pool of
    8 rows): its blocks grow past them, and the translations are the CUDA pool's without graphs."""
    plain = Translator(TranslatorConfig(model_dir=tiny_bundle, provider="cuda", pool=True))
    config = TranslatorConfig(
        model_dir=tiny_bundle, provider="cuda", pool=True, cuda_graphs=True, pool_rows=8, max_batch_sentences=8
    )
    graphs = Translator(config)
    assert_same_translations(plain, graphs, SENTENCES * 4, TranslationOptions(beam_size=4, shortlist=False))
    assert graphs.pools is not None
    pool = graphs.pools[0].pool
    assert pool.captured is not None and len(pool.lengths) > 8
