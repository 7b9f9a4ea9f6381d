# syntax=docker/dockerfile:1
# The translation service with the shipped English->German bundle. One file, two variants:
#   docker build -t mt-service:0.1.0 .                                       CPU, onnxruntime
#   docker build --build-arg DEVICE=cuda -t mt-service:0.1.0-cuda .          NVIDIA GPU, onnxruntime-gpu
# Stages: {cpu,cuda}-base (a Python runtime) -> base (the one DEVICE picks) -> deps (virtualenv with
# the serving dependencies only) -> runtime (base + virtualenv + code + bundle, non-root).
# No torch and no compiler reach the runtime stage: it gets the virtualenv, the engine and service
# code, nothing else.

ARG DEVICE=cpu
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# onnxruntime-gpu from PyPI is built against CUDA 13 and cuDNN 9 since 1.27 (CUDA 12 before): the
# base's CUDA major must match the one onnxruntime-gpu was built for, and the host driver must
# support it. Empty CUDA_ONNXRUNTIME takes the version constraints.txt pins; CUDA 12 hosts: see
# docs/deployment.md for the two build arguments to change.
ARG CUDA_IMAGE=nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04
ARG CUDA_ONNXRUNTIME=""

FROM ${PYTHON_IMAGE} AS cpu-base

FROM ${CUDA_IMAGE} AS cuda-base
# Ubuntu's own python3 (3.12); python3-venv only adds ensurepip's wheels, no compiler. Versions are
# left to the base image's release: pinning Ubuntu point releases breaks the build when they rotate.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*

FROM ${DEVICE}-base AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

FROM base AS deps
ARG DEVICE
ARG CUDA_ONNXRUNTIME
# Only pyproject.toml, the pinned versions and the helper that reads them: this layer is rebuilt when
# dependencies change, not when the code does. Every version comes from constraints.txt, as in CI.
COPY pyproject.toml constraints.txt scripts/pyproject_requirements.py /tmp/build/
# onnxruntime-gpu replaces onnxruntime (both install the same `onnxruntime` module); a
# CUDA_ONNXRUNTIME given at build time replaces the pinned one.
RUN if [ "$DEVICE" = cuda ]; then set -- --extra gpu --exclude onnxruntime; fi \
    && if [ -n "$CUDA_ONNXRUNTIME" ]; then \
         set -- "$@" --exclude onnxruntime-gpu --add "$CUDA_ONNXRUNTIME" \
         && sed -i '/^onnxruntime-gpu==/d' /tmp/build/constraints.txt; \
       fi \
    && python3 /tmp/build/pyproject_requirements.py --pyproject /tmp/build/pyproject.toml "$@" \
       > /tmp/build/requirements.txt \
    && python3 -m venv "$VIRTUAL_ENV" \
    && pip install --no-cache-dir -c /tmp/build/constraints.txt -r /tmp/build/requirements.txt

FROM base AS runtime
ARG DEVICE
LABEL org.opencontainers.image.title="mt-service" \
      org.opencontainers.image.description="Machine translation: a model repository on ONNX Runtime, dynamic batching, language identification, alignments" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin mt
COPY --from=deps /opt/venv /opt/venv
WORKDIR /app
# MT_DATA_DIR (the DeepL API's glossaries): the one directory the service writes besides /tmp;
# mount a volume here to keep it across containers.
RUN mkdir /app/data && chown 10001:10001 /app/data
# Code and models stay root-owned and read-only to the service user. The bundles change less often
# than the code, so they come first; each is a model of the repository MT_MODELS_DIR serves.
COPY models/en-de/bundle /app/models/en-de/bundle
COPY models/de-en/bundle /app/models/de-en/bundle
COPY engine /app/engine
COPY service /app/service
# Every other MT_* setting keeps its default (the README's configuration table); override with -e.
ENV MT_MODELS_DIR=/app/models \
    MT_PROVIDER=${DEVICE}
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
# The same command the tests start the service with (tests/deploy/service_process.py).
CMD ["python", "-m", "service", "--host", "0.0.0.0", "--port", "8000"]
