"""The service with ``MT_PROVIDER=cuda`` on a GPU, through a real server: skipped where onnxruntime
has no CUDA provider (CI); a CUDA provider that cannot start is a failure."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import onnxruntime as ort
import pytest
from live_server import StartService, scrape

pytestmark = pytest.mark.skipif(
    "CUDAExecutionProvider" not in ort.get_available_providers(), reason="onnxruntime has no CUDA provider here"
)

TEXTS = [f"{a} {b} ." for a in ("a dog", "the small girl", "two men", "a woman") for b in ("runs", "sits", "plays")]


def translate_concurrently(url: str, texts: list[str]) -> list[str]:
    """One request per text, all at once: the batcher puts them into shared GPU batches."""

    def one(text: str) -> str:
        response = httpx.post(
            f"{url}/v1/translate", json={"text": text, "target_lang": "de", "beam_size": 4}, timeout=60
        )
        assert response.status_code == 200, response.text
        return response.json()["translations"][0]["text"]

    with ThreadPoolExecutor(len(texts)) as pool:
        return list(pool.map(one, texts))


def test_the_service_batches_onto_the_gpu(start_service: StartService) -> None:
    gpu = start_service(provider="cuda", max_wait_ms=20)
    cpu = start_service(provider="cpu")
    [model] = httpx.get(f"{gpu.url}/v1/models", timeout=30).json()["models"]
    assert model["provider"] == "cuda" and model["variant"] == "fp32"

    on_gpu, on_cpu = translate_concurrently(gpu.url, TEXTS), translate_concurrently(cpu.url, TEXTS)
    pairs = list(zip(on_gpu, on_cpu, strict=True))
    assert sum(a == b for a, b in pairs) >= 0.9 * len(TEXTS), pairs

    with httpx.Client(base_url=gpu.url, timeout=30) as client:
        samples = scrape(client)
    sentences, batches = (
        sum(value for (name, _), value in samples.items() if name == f"mt_batch_size_sentences_{kind}")
        for kind in ("sum", "count")
    )
    assert sentences >= len(TEXTS) and batches < sentences, "requests sent together were batched together"
