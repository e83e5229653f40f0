"""Write the JSON schemas that tests/test_deploy.py checks our custom resources against.

Kubernetes' own kinds are checked with kubernetes-validate's bundled schemas; the
custom resources (KServe's ClusterServingRuntime and InferenceService, the
Prometheus operator's ServiceMonitor) have their schemas in their projects' CRD
files, which CI cannot download. This reads those files (Apache-2.0, from
kserve/kserve config/crd/full/ and prometheus-operator/prometheus-operator
example/prometheus-operator-crd/) and writes deploy/schemas/<kind>.json:

    python scripts/crd_schemas.py CRD.yaml... --source "kserve <commit>" ...

Each schema is the served storage version's openAPIV3Schema with descriptions
left out; objects that list their properties and do not keep unknown fields
refuse other properties (as `kubectl apply --validate=strict` does), so a
misspelt field fails. InferenceService keeps its predictor and the predictor's
model in full; the subtrees our manifests never use (transformer, explainer,
the framework-specific predictor specs, worker specs) become plain objects.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

#: Subtrees kept only as "an object" (path of property names from the root).
PRUNE = {
    "InferenceService": {
        ("spec", "transformer"),
        ("spec", "explainer"),
        ("spec", "canary"),
        *(
            ("spec", "predictor", name)
            for name in (
                "huggingface lightgbm onnx paddle pmml pytorch sklearn tensorflow triton xgboost "
                "workerSpec containers initContainers volumes affinity"
            ).split()
        ),
    }
}


def _strict(node: Any, path: tuple[str, ...], prune: set[tuple[str, ...]]) -> Any:
    if isinstance(node, list):
        return [_strict(v, path, prune) for v in node]
    if not isinstance(node, dict):
        return node
    if path in prune:
        return {"type": "object"}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key == "properties":
            out[key] = {name: _strict(v, (*path, name), prune) for name, v in value.items()}
        else:
            out[key] = _strict(value, path, prune)
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
        and path != ("metadata",)
    ):
        out["additionalProperties"] = False
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("crds", nargs="+", type=Path)
    parser.add_argument("--source", action="append", default=[], help="where the files came from")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "deploy" / "schemas")
    args = parser.parse_args()
    for path in args.crds:
        crd = yaml.safe_load(path.read_text())
        kind = crd["spec"]["names"]["kind"]
        version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
        schema = _strict(version["schema"]["openAPIV3Schema"], (), PRUNE.get(kind, set()))
        # The API server fills these in; every manifest sets them.
        schema["properties"]["apiVersion"] = {"const": f"{crd['spec']['group']}/{version['name']}"}
        schema["properties"]["kind"] = {"const": kind}
        schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata", "spec"})
        schema["$comment"] = f"from {path.name} ({'; '.join(args.source)}) by scripts/crd_schemas.py"
        out = args.out / f"{kind.lower()}.json"
        out.write_text(json.dumps(schema, sort_keys=True, separators=(",", ":")) + "\n")
        print(f"{out}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
