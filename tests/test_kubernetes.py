"""The Kubernetes manifests (deploy/kubernetes), rendered and validated offline: no cluster runs here.

kustomize renders them (`kubectl kustomize` when kubectl is installed, else the same few steps in Python), the core
resources are checked against Kubernetes' own schemas (PyPI's kubernetes-validate, strict: an unknown field is an
error), and the KEDA ScaledObject against KEDA's (npm's @kubernetes-models/keda). Then what the manifests promise
is read back: the probes, the stop policy, the caches, the secrets' names, the autoscaler's source."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helpers import npm_install

ROOT = Path(__file__).resolve().parent.parent
KUSTOMIZE = ROOT / "deploy" / "kubernetes"
CACHE = Path(__file__).resolve().parent / ".cache"


def _python_render() -> list[dict]:
    """The kustomization's steps this one uses: resources, namespace, labels, images."""
    spec = yaml.safe_load((KUSTOMIZE / "kustomization.yaml").read_text())
    images = {image["name"]: f"{image['newName']}:{image['newTag']}" for image in spec.get("images", [])}
    labels = {k: v for entry in spec.get("labels", []) for k, v in entry["pairs"].items()}
    out = []
    for resource in spec["resources"]:
        for document in yaml.safe_load_all((KUSTOMIZE / resource).read_text()):
            if not document:
                continue
            metadata = document.setdefault("metadata", {})
            metadata.setdefault("labels", {}).update(labels)
            if document["kind"] != "Namespace":
                metadata["namespace"] = spec["namespace"]
            for container in document.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
                container["image"] = images.get(container["image"], container["image"])
            out.append(document)
    return out


def rendered() -> list[dict]:
    """The manifests as `kubectl apply -k` would send them."""
    if shutil.which("kubectl"):
        text = subprocess.run(
            ["kubectl", "kustomize", str(KUSTOMIZE)], capture_output=True, text=True, check=True, timeout=120
        ).stdout
        return [document for document in yaml.safe_load_all(text) if document]
    return _python_render()


def by_kind(documents: list[dict]) -> dict[tuple[str, str], dict]:
    return {(document["kind"], document["metadata"]["name"]): document for document in documents}


def test_the_python_rendering_is_kustomizes():
    if not shutil.which("kubectl"):
        pytest.skip("kubectl is not installed: the Python rendering is used alone")
    assert by_kind(rendered()) == by_kind(_python_render())


def test_core_resources_validate_strictly_against_the_kubernetes_schemas():
    import kubernetes_validate

    version = kubernetes_validate.latest_version()
    documents = rendered()
    kinds = sorted(document["kind"] for document in documents)
    assert kinds == sorted(
        ["Namespace", "ConfigMap", "Secret", "Secret", "Service", "Service", "StatefulSet", "Deployment", "Deployment",
         "ScaledObject", "Deployment", "Service", "Deployment"]  # the last three: split-nodes.yaml
    )  # fmt: skip
    for document in documents:
        if document["apiVersion"].startswith("keda.sh/"):
            continue
        kubernetes_validate.validate(document, version, strict=True)
    # the validator bites: a misspelt field of the worker's container is refused
    worker = copy.deepcopy(by_kind(documents)[("Deployment", "hinge-worker")])
    worker["spec"]["template"]["spec"]["containers"][0]["comand"] = ["hinge", "worker"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, version, strict=True)


KEDA_CHECK = """
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";
import fs from "node:fs";
for (const document of JSON.parse(fs.readFileSync(process.argv[2], "utf8"))) {
  new ScaledObject(document).validate();
}
console.log("valid");
"""


def test_the_scaled_object_validates_against_kedas_schema(tmp_path):
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm and node are needed to install @kubernetes-models/keda; they are not on this machine")
    tools = CACHE / "keda"
    npm_install(tools, "hinge-keda-check", ["@kubernetes-models/keda@2"])
    (tools / "check.mjs").write_text(KEDA_CHECK)
    scaled = [document for document in rendered() if document["kind"] == "ScaledObject"]
    broken = copy.deepcopy(scaled[0])
    broken["spec"]["minReplicaCount"] = "one"
    for documents, valid in ((scaled, True), ([broken], False)):
        path = tmp_path / f"scaled-{valid}.json"
        path.write_text(json.dumps(documents))
        result = subprocess.run(
            ["node", str(tools / "check.mjs"), str(path)], cwd=tools, capture_output=True, text=True, timeout=120
        )
        assert (result.returncode == 0) == valid, result.stderr
        if not valid:
            assert "minReplicaCount must be integer" in result.stderr


def test_the_manifests_say_what_the_service_needs():
    from core.config import Settings
    from service.api.routes.health import QueueStats

    documents = by_kind(rendered())
    api = documents[("Deployment", "hinge-api")]["spec"]["template"]["spec"]
    worker_pod = documents[("Deployment", "hinge-worker")]["spec"]["template"]["spec"]
    (api_container,) = api["containers"]
    (worker,) = worker_pod["containers"]
    assert api_container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert api_container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert worker["livenessProbe"]["exec"]["command"] == ["hinge", "worker-health"]
    assert worker["command"] == ["hinge", "worker"] and api_container["command"][:2] == ["hinge", "api"]
    config = documents[("ConfigMap", "hinge-config")]["data"]
    assert config["HINGE_OBJECT_STORE"] == "s3" and config["HINGE_SHUTDOWN_POLICY"] == "requeue"
    assert worker_pod["terminationGracePeriodSeconds"] >= 30, "time to put the job back before SIGKILL"
    # the S3 settings are a Secret whose every key is a setting Hinge reads
    s3 = documents[("Secret", "hinge-s3")]["stringData"]
    names = {f"HINGE_{name.upper()}" for name in Settings.model_fields}
    assert set(s3) <= names and {"HINGE_S3_ENDPOINT_URL", "HINGE_S3_SECRET_ACCESS_KEY"} <= set(s3)
    assert set(config) <= names
    for pod in (api, worker_pod):
        (container,) = pod["containers"]
        sources = {ref.get("secretRef", ref.get("configMapRef", {})).get("name") for ref in container["envFrom"]}
        assert sources == {"hinge-config", "hinge-s3", "hinge-redis"}
        env = {item["name"]: item for item in container["env"]}
        assert env["REDIS_URL"]["value"] == "redis://:$(REDIS_PASSWORD)@hinge-redis:6379/0"
    # each worker pod has a local cache of data sets, bounded below its volume's limit
    mounts = {mount["name"]: mount["mountPath"] for mount in worker["volumeMounts"]}
    assert mounts["cache"] == "/var/lib/hinge/cache"
    (cache,) = [volume for volume in worker_pod["volumes"] if volume["name"] == "cache"]
    limit_gib = int(cache["emptyDir"]["sizeLimit"].rstrip("Gi"))
    cache_bytes = int({item["name"]: item for item in worker["env"]}["HINGE_WORKER_CACHE_BYTES"]["value"])
    assert cache_bytes < limit_gib * 2**30
    # Redis never evicts and keeps an append-only file on a volume
    redis_spec = documents[("StatefulSet", "hinge-redis")]["spec"]
    args = redis_spec["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction" and "--appendonly" in args
    assert redis_spec["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    # KEDA scales the worker Deployment on the API's /queue, whose `pending` field exists
    scaled = documents[("ScaledObject", "hinge-worker")]["spec"]
    assert scaled["scaleTargetRef"]["name"] == "hinge-worker" and scaled["minReplicaCount"] >= 1
    (trigger,) = scaled["triggers"]
    assert trigger["type"] == "metrics-api"
    assert trigger["metadata"]["url"].startswith("http://hinge-api.hinge.svc") and trigger["metadata"]["url"].endswith(
        ":8000/queue"
    )
    assert trigger["metadata"]["valueLocation"] in QueueStats.model_fields
    openapi = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    assert "/queue" in openapi["paths"]


def test_queue_answers_what_an_autoscaler_reads(service, http):
    stats = http.get("/queue").json()
    assert set(stats) == {"queued", "running", "pending", "workers"}
    assert stats["pending"] == stats["queued"] + stats["running"] and stats["workers"] >= 1


def test_split_nodes_reach_the_scheduler_the_workers_are_told_of():
    """The nodes of trainings split over nodes (split-nodes.yaml): none until scaled, each a `dask worker` of the
    scheduler's Service with the object store's settings, spread one a machine; the workers' setting names that
    Service."""
    documents = by_kind(rendered())
    config = documents[("ConfigMap", "hinge-config")]["data"]
    service = documents[("Service", "hinge-dask-scheduler")]
    port = service["spec"]["ports"][0]["port"]
    assert config["HINGE_DASK_SCHEDULER"] == f"tcp://hinge-dask-scheduler:{port}"
    nodes = documents[("Deployment", "hinge-node")]
    assert nodes["spec"]["replicas"] == 0
    pod = nodes["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"][:3] == ["dask", "worker", f"tcp://hinge-dask-scheduler:{port}"]
    assert {"configMapRef": {"name": "hinge-config"}} in container["envFrom"]
    assert {"secretRef": {"name": "hinge-s3"}} in container["envFrom"]
    assert (
        pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"][
            "topologyKey"
        ]
        == "kubernetes.io/hostname"
    )
