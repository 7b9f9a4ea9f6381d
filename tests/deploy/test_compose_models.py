"""docker-compose.models.yml: the translator serves a model repository of the host (an OPUS-MT or
NLLB model converted elsewhere, README "Serve an OPUS-MT or NLLB model"), mounted read-only where
the image's MT_MODELS_DIR points, in place of the shipped bundles the image holds."""

from __future__ import annotations

from pathlib import Path

from dockerfile_reader import dockerignored, stages
from repo_root import REPO
from test_compose import COMPOSE, assert_override_follows_the_specification, load

MODELS_OVERRIDE = REPO / "docker-compose.models.yml"


def image_models_dir() -> str:
    """The runtime image's MT_MODELS_DIR (its ENV)."""
    variables = [word for env in stages()["runtime"].all("ENV") for word in env.args.split()]
    return next(word.split("=", 1)[1] for word in variables if word.startswith("MT_MODELS_DIR="))


def test_the_models_override_follows_the_compose_specification(tmp_path: Path) -> None:
    assert_override_follows_the_specification(MODELS_OVERRIDE, tmp_path)


def test_the_host_repository_is_mounted_read_only_where_the_image_serves_models() -> None:
    (volume,) = load(MODELS_OVERRIDE)["services"]["translator"]["volumes"]
    source, target, mode = volume.rsplit(":", 2)
    # No default: a forgotten MODELS_DIR stops compose with the message instead of mounting nothing.
    assert source.startswith("${MODELS_DIR:?") and source.endswith("}")
    assert (target, mode) == (image_models_dir(), "ro")
    # Compose merges a service's volumes by their target: the data volume stays beside it.
    base = [volume.split(":")[1] for volume in load(COMPOSE)["services"]["translator"]["volumes"]]
    assert "/app/data" in base and image_models_dir() not in base


def test_the_image_holds_no_model_but_the_shipped_ones() -> None:
    """What the override is for: a bundle converted into models/ never reaches the image."""
    assert not dockerignored("models/en-de/bundle/manifest.json")
    assert dockerignored("models/opus-mt-en-de/manifest.json")


def test_the_readme_starts_compose_with_the_models_override() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Serve an OPUS-MT or NLLB model", 1)[1].split("\n## ", 1)[0]
    assert "MODELS_DIR=~/mt-models" in section
    assert "docker compose -f docker-compose.yml -f docker-compose.models.yml up" in section
    assert f"-v ~/mt-models:{image_models_dir()}:ro" in section
