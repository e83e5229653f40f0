"""The container image and the Kubernetes and KServe manifests (``Dockerfile``, ``deploy/``).

Every manifest is validated offline: Kubernetes' own kinds against the schemas
kubernetes-validate bundles (strict: an unknown field fails), the custom resources
(KServe's, the Prometheus operator's ServiceMonitor) against the schemas in
``deploy/schemas/``, made from their projects' CRDs by ``scripts/crd_schemas.py``.
The manifests agree with each other (selectors, port names, the HPA's target).
And the Deployment, the KServe runtime and the image are started the way their
container starts (the image's entrypoint with the manifest's args, the mounted
model folder in its place) in a private network namespace, on exactly the ports
they declare: every declared port accepts, every probe answers 200, the image's
HEALTHCHECK exits 0, and SIGTERM ends it within the grace period.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parents[1]
DEPLOY = ROOT / "deploy"
MANIFESTS = sorted(DEPLOY.glob("*/*.yaml"))
SCHEMAS = DEPLOY / "schemas"
#: The oldest Kubernetes release the manifests are meant for (autoscaling/v2, policy/v1 GA).
KUBERNETES = "1.29.0"


def documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in MANIFESTS:
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc:
                out.append((f"{path.relative_to(DEPLOY)}#{i}", doc))
    return out


DOCS = documents()


def find(kind: str) -> dict[str, Any]:
    (doc,) = [d for _, d in DOCS if d["kind"] == kind]
    return doc


# -- offline validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "doc"), DOCS, ids=[w for w, _ in DOCS])
def test_every_manifest_is_valid(where: str, doc: dict[str, Any]) -> None:
    schema_file = SCHEMAS / f"{doc['kind'].lower()}.json"
    if schema_file.exists():  # a custom resource
        import jsonschema

        schema = json.loads(schema_file.read_text())
        errors = [
            f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft7Validator(schema).iter_errors(doc)
        ]
        assert errors == [], where
    else:
        kubernetes_validate = pytest.importorskip("kubernetes_validate")
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_a_misspelt_field_is_caught() -> None:
    """The validation above would catch what `kubectl apply` refuses (or silently drops)."""
    import jsonschema
    import kubernetes_validate

    runtime = json.loads(json.dumps(find("ClusterServingRuntime")))
    runtime["spec"]["containers"][0]["argz"] = []
    schema = json.loads((SCHEMAS / "clusterservingruntime.json").read_text())
    assert list(jsonschema.Draft7Validator(schema).iter_errors(runtime))
    deployment = json.loads(json.dumps(find("Deployment")))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)


def test_the_manifests_agree() -> None:
    deployment, service = find("Deployment"), find("Service")
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    assert find("PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (container,) = pod["spec"]["containers"]
    port_names = {p["name"] for p in container["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} == port_names == {"http", "grpc", "metrics"}
    monitor = find("ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in service["spec"]["ports"]}
    hpa = find("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    # The metrics the HPA asks for are the ones the adapter's rules name.
    rules = yaml.safe_load(find("ConfigMap")["data"]["config.yaml"])["rules"]
    custom = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
    assert custom == {r["name"]["as"] for r in rules}
    # terminationGracePeriodSeconds leaves the server its whole --exit-timeout-secs.
    args = container["args"]
    exit_timeout = float(args[args.index("--exit-timeout-secs") + 1])
    assert pod["spec"]["terminationGracePeriodSeconds"] >= exit_timeout
    # An InferenceService names the runtime, for a format the runtime takes.
    isvc, runtime = find("InferenceService"), find("ClusterServingRuntime")
    model = isvc["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"]["name"] in {f["name"] for f in runtime["spec"]["supportedModelFormats"]}


# -- the image's and the manifests' start, for real -------------------------------------------------


def dockerfile() -> dict[str, Any]:
    """ENTRYPOINT, CMD and HEALTHCHECK (exec form) and the final stage's USER."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    final = text.rsplit("\nFROM ", 1)[1]
    out: dict[str, Any] = {}
    for line in final.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("ENTRYPOINT", "CMD"):
            out[word] = json.loads(rest)
        elif word == "HEALTHCHECK":
            out[word] = json.loads(rest.split(" CMD ", 1)[1])
        elif word == "USER":
            out[word] = rest.strip()
        elif word == "EXPOSE":
            out[word] = [int(p) for p in rest.split()]
    return out


def test_the_image_runs_as_a_user_and_says_how_it_starts() -> None:
    image = dockerfile()
    assert image["USER"].split(":")[0] not in ("0", "root")
    assert image["ENTRYPOINT"] == ["tritonpy", "serve"]
    assert image["CMD"] == ["--model-repository", "/models"]
    assert image["EXPOSE"] == [8000, 8001, 8002]
    assert "/v2/health/ready" in " ".join(image["HEALTHCHECK"])


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model repository to mount: the example `simple` model (ONNX)."""
    pytest.importorskip("tritonpy_backend_onnx")
    repo = tmp_path_factory.mktemp("models")
    shutil.copytree(ROOT / "examples" / "model_repository" / "simple", repo / "simple")
    return repo


def local(argv: list[str], mounts: dict[str, Path]) -> list[str]:
    """``argv`` as it would run in the container, on this machine: `tritonpy` and `python`
    are this interpreter's, and a mount path is the local folder mounted there."""
    out = []
    for i, arg in enumerate(argv):
        if i == 0 and arg == "tritonpy":
            out += [sys.executable, "-m", "tritonpy"]
            continue
        if i == 0 and arg == "python":
            out.append(sys.executable)
            continue
        for mount, path in mounts.items():
            arg = re.sub(rf"(^|=){re.escape(mount)}(?=$|/)", lambda m, p=path: m.group(1) + str(p), arg)
        out.append(arg)
    return out


def run_as_pod(tmp_path: Path, spec: dict[str, Any]) -> dict[str, Any]:
    if not shutil.which("unshare") or subprocess.run(["unshare", "-rn", "true"]).returncode != 0:
        pytest.skip("no private network namespace here (unshare -rn): the fixed ports could be taken")
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "out.json"
    subprocess.run(
        [
            "unshare",
            "-rn",
            sys.executable,
            str(Path(__file__).parent / "tritonpy_podrun.py"),
            "spec.json",
            str(out),
        ],
        cwd=tmp_path,
        check=True,
        timeout=300,
    )
    return dict(json.loads(out.read_text()))


def probe(container: dict[str, Any], name: str) -> tuple[int, str]:
    get = container[name]["httpGet"]
    port = get["port"]
    if isinstance(port, str):
        port = {p["name"]: p["containerPort"] for p in container["ports"]}[port]
    return int(port), str(get["path"])


def check(result: dict[str, Any], spec: dict[str, Any]) -> None:
    assert result["ready"], result["log"]
    assert result["tcp"] == {str(p): True for p in spec["tcp"]}, result["log"]
    assert set(result["http"].values()) == {200}, result
    assert result["exec"] == [0] * len(spec["exec"]), result
    assert result["exit"] == 0, result


@pytest.mark.integration
def test_the_deployment_serves_on_its_ports_and_probes(repository: Path, tmp_path: Path) -> None:
    pod = find("Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["mountPath"]: repository for m in container["volumeMounts"] if m["name"] == "models"}
    argv = dockerfile()["ENTRYPOINT"] + container["args"]
    assert "/models" in argv
    spec = {
        "argv": local(argv, mounts),
        "tcp": [p["containerPort"] for p in container["ports"]],
        "http": [probe(container, p) for p in ("startupProbe", "livenessProbe", "readinessProbe")],
        "exec": [],
        "grace": pod["terminationGracePeriodSeconds"],
    }
    check(run_as_pod(tmp_path, spec), spec)


@pytest.mark.integration
def test_the_kserve_runtime_serves_on_its_ports_and_probes(repository: Path, tmp_path: Path) -> None:
    (container,) = find("ClusterServingRuntime")["spec"]["containers"]
    argv = dockerfile()["ENTRYPOINT"] + container["args"]
    args = dict(a.split("=", 1) for a in container["args"])
    spec = {
        # KServe's storage initializer puts the storageUri's files in /mnt/models.
        "argv": local(argv, {"/mnt/models": repository}),
        "tcp": [p["containerPort"] for p in container["ports"]] + [int(args["--grpc-port"])],
        "http": [probe(container, p) for p in ("livenessProbe", "readinessProbe")],
        "exec": [],
        "grace": 30,  # a pod's default terminationGracePeriodSeconds
    }
    check(run_as_pod(tmp_path, spec), spec)


@pytest.mark.integration
def test_the_image_entrypoint_serves_and_its_healthcheck_passes(repository: Path, tmp_path: Path) -> None:
    image = dockerfile()
    spec = {
        "argv": local(image["ENTRYPOINT"] + image["CMD"], {"/models": repository}),
        "tcp": image["EXPOSE"],
        "http": [[8000, "/v2/health/ready"]],
        "exec": [local(image["HEALTHCHECK"], {})],
        "grace": 35,
    }
    check(run_as_pod(tmp_path, spec), spec)
