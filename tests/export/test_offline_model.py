"""README's "Serve an OPUS-MT or NLLB model", walked as written: convert where there is a network,
carry the archive alone, serve it on a server where PyTorch and transformers cannot be imported.

The one step replaced is the download: no model hub is reached, so ``hf download`` gets the tiny
MarianMT checkpoint ``export.tiny_hf`` builds (the ``tiny_marian`` fixture), laid out as the Hub's.
Every other command runs as the README writes it, in bash, with ``python`` this interpreter and
``~`` the server's home (a directory of its own, holding nothing but the archive).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from repo_root import REPO

from service.launcher import PACKAGE_ROOT, LiveService

pytest.importorskip("transformers", minversion="5.0")
pytest.importorskip("torch")

SECTION = "## Serve an OPUS-MT or NLLB model"
BLOCK = re.compile(r"```bash\n(.*?)```", re.S)
SERVE = re.compile(r"((?:\w+=\S+ )*)python -m service")
BLOCKED = ("torch", "transformers")  # what the server must serve without


def section_blocks() -> list[list[str]]:
    """The section's bash blocks, each as its commands: comments dropped, continued lines joined."""
    readme = (REPO / "README.md").read_text()
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = []
    for block in BLOCK.findall(section):
        lines = [line.split("  #", 1)[0].rstrip() for line in block.replace("\\\n", " ").splitlines()]
        blocks.append([line for line in lines if line and not line.startswith("#")])
    return blocks


def bash(command: str, *, cwd: Path, home: Path, bin_dir: Path) -> str:
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(PACKAGE_ROOT)}
    run = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{command}\n{run.stdout}\n{run.stderr}"
    return run.stdout


def test_the_readme_s_offline_steps_serve_a_converted_opus_mt_model_without_torch(
    tiny_marian: Path, tmp_path: Path
) -> None:
    network, server, *_ = section_blocks()
    bin_dir = tmp_path / "bin"  # `python` in the README's commands: this interpreter, this environment
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    (bin_dir / "python").chmod(0o755)

    # 1. Where there is a network: the install is this test's environment; the download, the tiny model.
    online = tmp_path / "online"
    online.mkdir()
    assert network[0].startswith("python3 -m venv") and network[1].startswith("pip install -c constraints.txt")
    archives = []
    for command in network[2:]:
        if command.startswith("hf download "):
            local_dir = shlex.split(command)[shlex.split(command).index("--local-dir") + 1]
            shutil.copytree(tiny_marian, online / local_dir)
            continue
        bash(command, cwd=online, home=online, bin_dir=bin_dir)
        if command.startswith("tar ") and "-czf" in command:
            archives.append(shlex.split(command)[shlex.split(command).index("-czf") + 1])
    assert archives == ["opus-mt-en-de.tar.gz"]

    # 2. Only the archive is carried to the server.
    home = tmp_path / "server"
    home.mkdir()
    shutil.copy(online / archives[0], home)

    # 3. On the server: unpacked, served without PyTorch or transformers, asked what the README asks.
    blocked = tmp_path / "not-installed"
    for name in BLOCKED:
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('{name} is not on the server')\n")
    serve = next(i for i, command in enumerate(server) if SERVE.fullmatch(command))
    for command in server[:serve]:
        bash(command, cwd=home, home=home, bin_dir=bin_dir)
    settings = dict(pair.split("=", 1) for pair in SERVE.fullmatch(server[serve]).group(1).split())  # type: ignore[union-attr]
    settings = {name: value.replace("~", str(home), 1) for name, value in settings.items()}
    settings["PYTHONPATH"] = f"{blocked}:{PACKAGE_ROOT}"
    with LiveService(settings, tmp_path / "service.log") as service:
        address = service.url.removeprefix("http://")
        answers = [
            bash(command.replace("localhost:8000", address), cwd=home, home=home, bin_dir=bin_dir)
            for command in server[serve + 1 :]
        ]
        with httpx.Client(base_url=service.url, timeout=60) as client:
            imported = client.get("/v1/models").json()
    assert "is not on the server" not in service.log()
    models = json.loads(answers[0])["models"]
    assert [(m["id"], m["loaded"], m["error"]) for m in models] == [("opus-mt-en-de", True, None)]
    assert models[0]["memory_mb"] > 0 and imported == json.loads(answers[0])
    translation = json.loads(answers[1])
    assert translation["model"].startswith("opus-mt-en-de:") and translation["translations"][0]["text"]
