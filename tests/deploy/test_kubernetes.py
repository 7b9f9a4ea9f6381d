"""deploy/k8s: manifests validated offline against the Kubernetes OpenAPI schemas (kubernetes-validate
ships them), overlays rendered with `kubectl kustomize`, and the wiring checked: probes, resources,
graceful shutdown, selectors, autoscaling, scraping, and the GPU variant."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from dockerfile_reader import stages
from repo_root import REPO
from service_process import CONTAINER_PORT

from service.settings import Settings

K8S = REPO / "deploy" / "k8s"
BASE = K8S / "base"
VARIANTS = {"cpu": K8S / "overlays" / "cpu", "gpu": K8S / "overlays" / "gpu"}
# The oldest Kubernetes release the manifests must work on, and the newest the validator knows.
OLDEST_KUBERNETES = "1.29.0"


def kubernetes_versions() -> list[str]:
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate not installed: not validated")
    return [OLDEST_KUBERNETES, validate.latest_version()]


def validate(document: dict[str, Any]) -> None:
    import kubernetes_validate

    for version in kubernetes_versions():
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            name = f"{document['kind']}/{document['metadata']['name']}"
            raise AssertionError(f"{name} is invalid for Kubernetes {version}: {error.message}") from error


@functools.cache
def render(directory: Path) -> dict[str, dict[str, Any]]:
    """`kubectl kustomize` output by kind (one object of each kind here); callers must not modify it."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: kustomize overlays not rendered")
    result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    by_kind = {d["kind"]: d for d in documents}
    assert len(by_kind) == len(documents), "one object per kind expected"
    return by_kind


def container(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (translator,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    return translator


def test_base_resources_are_valid_without_kustomize() -> None:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text(encoding="utf-8"))
    for name in kustomization["resources"]:
        for document in yaml.safe_load_all((BASE / name).read_text(encoding="utf-8")):
            validate(document)


@pytest.mark.parametrize("variant", VARIANTS)
def test_rendered_overlay_is_valid(variant: str) -> None:
    objects = render(VARIANTS[variant])
    assert set(objects) == {"ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"}
    for document in objects.values():
        validate(document)


@pytest.mark.parametrize("variant", VARIANTS)
def test_probes_resources_and_graceful_shutdown(variant: str) -> None:
    objects = render(VARIANTS[variant])
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    translator = container(objects)
    assert "command" not in translator and "args" not in translator, "the image's CMD is the tested command"
    assert translator["ports"] == [{"name": "http", "containerPort": CONTAINER_PORT}]
    probes = {kind: translator[kind]["httpGet"] for kind in ("readinessProbe", "livenessProbe", "startupProbe")}
    assert probes["readinessProbe"] == {"path": "/readyz", "port": "http"}
    assert probes["livenessProbe"] == probes["startupProbe"] == {"path": "/healthz", "port": "http"}
    for bound in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(translator["resources"][bound]), bound
    # SIGKILL comes terminationGracePeriodSeconds after the preStop hook starts: hook + drain must fit.
    config = objects["ConfigMap"]["data"]
    drain = float(config.get("MT_DRAIN_TIMEOUT_S", Settings().drain_timeout_s))
    sleep = translator["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > float(sleep[1]) + drain
    assert float(config["MT_REQUEST_TIMEOUT_S"]) <= drain, "an accepted request may run this long"
    assert translator["envFrom"] == [{"configMapRef": {"name": objects["ConfigMap"]["metadata"]["name"]}}]


@pytest.mark.parametrize("variant", VARIANTS)
def test_pods_run_as_the_images_non_root_user(variant: str) -> None:
    objects = render(VARIANTS[variant])
    security = objects["Deployment"]["spec"]["template"]["spec"]["securityContext"]
    (user,) = stages()["runtime"].all("USER")
    assert security["runAsNonRoot"] is True
    assert str(security["runAsUser"]) == user.args.split(":")[0]
    assert container(objects)["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("variant", VARIANTS)
def test_service_autoscaler_and_budget_select_the_pods(variant: str) -> None:
    objects = render(VARIANTS[variant])
    deployment = objects["Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert "replicas" not in deployment["spec"], "the HorizontalPodAutoscaler owns the replica count"
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    service = objects["Service"]["spec"]
    assert service["selector"].items() <= pod_labels.items()
    assert {p["targetPort"] for p in service["ports"]} <= {p["name"] for p in container(objects)["ports"]}
    hpa = objects["HorizontalPodAutoscaler"]["spec"]
    target = hpa["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert 1 <= hpa["minReplicas"] <= hpa["maxReplicas"]
    pdb = objects["PodDisruptionBudget"]["spec"]
    assert pdb["selector"]["matchLabels"].items() <= pod_labels.items()


@pytest.mark.parametrize("variant", VARIANTS)
def test_pods_are_annotated_for_prometheus(variant: str) -> None:
    objects = render(VARIANTS[variant])
    annotations = objects["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert annotations["prometheus.io/port"] == str(CONTAINER_PORT)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_only_in_the_gpu_variant(variant: str) -> None:
    objects = render(VARIANTS[variant])
    translator = container(objects)
    gpus = translator["resources"]["limits"].get("nvidia.com/gpu")
    provider = objects["ConfigMap"]["data"]["MT_PROVIDER"]
    tolerations = objects["Deployment"]["spec"]["template"]["spec"].get("tolerations", [])
    if variant == "gpu":
        assert gpus == 1 and provider == "cuda" and translator["image"].endswith("-cuda")
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    else:
        assert gpus is None and provider == "cpu" and not translator["image"].endswith("-cuda")
        assert not tolerations
