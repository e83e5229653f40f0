"""The Grafana dashboard (``deploy/grafana/tritonpy-dashboard.json``).

Its JSON has the shape Grafana imports (panels with targets, unique ids, a
``schemaVersion``, a Prometheus data-source variable every query goes through),
and every PromQL expression in it (panel targets and template-variable queries)
is parsed with a real PromQL parser (``promql-parser``): every metric it names
is exported by a live ``tritonpy serve`` (with a response cache and
``histogram_latencies=true``, after successes, a cache hit and a failure), and
every label it selects or groups by is on that metric. The GPU families, which
only a host with an NVIDIA driver exports, are allowed by name (see ``GPU_ONLY``).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tritonpy_serverprocess import ServerProcess

promql = pytest.importorskip("promql_parser", reason="promql-parser (the test extra)")

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "tritonpy-dashboard.json"
METRICS_SOURCE = ROOT / "core" / "tritonpy" / "metrics" / "__init__.py"

#: Families exported only where NVML finds a GPU (``metrics/_system.py``): on a host
#: without one they cannot be scraped, so they are checked against the core's source
#: instead, with the labels they carry there.
GPU_ONLY = {
    "nv_gpu_utilization": {"gpu_uuid"},
    "nv_gpu_memory_total_bytes": {"gpu_uuid"},
    "nv_gpu_memory_used_bytes": {"gpu_uuid"},
    "nv_gpu_power_usage": {"gpu_uuid"},
}
#: Labels Prometheus adds to every series of a target when it scrapes; never on /metrics.
TARGET_LABELS = {"instance", "job"}
#: Grafana's interval macros, replaced by a duration before parsing.
MACROS = re.compile(r"\$__(rate_interval|interval|range)\b")


# -- the dashboard --------------------------------------------------------------------------------


def load() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return dashboard


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside a collapsed row included."""
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out += panel.get("panels", [])
    return out


def expressions(dashboard: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(test id, where, PromQL) for every panel target and every query variable."""
    out = []
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            where = f"panel {panel['id']} ({panel['title']}) {target['refId']}"
            out.append((f"panel{panel['id']}-{target['refId']}", where, target["expr"]))
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"] if isinstance(var["query"], str) else var["query"]["query"]
            out.append((f"var-{var['name']}", f"variable ${var['name']}", query))
    return out


# -- PromQL ---------------------------------------------------------------------------------------

#: Grafana's ``label_values(selector, label)`` (a variable query, not PromQL).
LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*$")


def selectors(query: str) -> list[tuple[str, set[str]]]:
    """(metric name, label names it must carry) for every series selector in ``query``:
    the labels of its matchers and of every ``by (...)`` grouping above it."""
    values = LABEL_VALUES.match(query)
    if values:  # the selector's labels and the label whose values it lists
        return [(name, labels | {values.group(2)}) for name, labels in selectors(values.group(1))]
    out: list[tuple[str, set[str]]] = []
    _walk(promql.parse(MACROS.sub("5m", query)), set(), out)
    return out


def _walk(node: Any, grouped: set[str], out: list[tuple[str, set[str]]]) -> None:
    if isinstance(node, promql.MatrixSelector):
        node = node.vector_selector
    if isinstance(node, promql.VectorSelector):
        assert node.name, f"a selector without a metric name: {node}"
        out.append((node.name, grouped | {m.name for m in node.matchers.matchers}))
    elif isinstance(node, promql.AggregateExpr):
        modifier = node.modifier
        by = set()
        if modifier is not None and modifier.type == promql.AggModifierType.By:
            by = set(modifier.labels)
        _walk(node.expr, grouped | by, out)
        if node.param is not None:
            _walk(node.param, grouped, out)
    elif isinstance(node, promql.BinaryExpr):
        _walk(node.lhs, grouped, out)
        _walk(node.rhs, grouped, out)
    elif isinstance(node, promql.Call):
        for arg in node.args:
            _walk(arg, grouped, out)
    elif isinstance(node, promql.ParenExpr | promql.UnaryExpr | promql.SubqueryExpr):
        _walk(node.expr, grouped, out)
    else:
        assert isinstance(node, promql.NumberLiteral | promql.StringLiteral), f"unhandled node {type(node)}"


def test_the_extractor_finds_metrics_not_functions_or_labels() -> None:
    query = (
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket{model=~"$model"}[$__rate_interval])))'
        " / on (model) group_left max without (gpu) (b) + -(c offset 5m) or vector(1)"
        ' + count_over_time(d[5m:1m]) + label_replace(e, "x", "$1", "y", "(.*)")'
    )
    assert selectors(query) == [
        ("a_bucket", {"le", "model"}),
        ("b", set()),
        ("c", set()),
        ("d", set()),
        ("e", set()),
    ]
    assert selectors('label_values(f{instance=~"$instance"}, model)') == [("f", {"instance", "model"})]
    with pytest.raises(ValueError):  # a typo is a parse error, not a silently shorter list
        selectors("sum(rate(a[5m])")


# -- the shape Grafana imports --------------------------------------------------------------------


def test_the_dashboard_has_grafanas_shape() -> None:
    dashboard = load()
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert dashboard["title"] and dashboard["uid"]
    assert dashboard.get("id") is None  # an id would clash on import; Grafana assigns one
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    source = variables["datasource"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    via_variable = {"type": "prometheus", "uid": "${datasource}"}

    panels = all_panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    occupied: dict[tuple[int, int], int] = {}
    for panel in panels:
        where = f"panel {panel['id']} ({panel.get('title')})"
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24 and pos["h"] > 0, where
        for y in range(pos["y"], pos["y"] + pos["h"]):
            for x in range(pos["x"], pos["x"] + pos["w"]):
                assert (x, y) not in occupied, f"{where} overlaps panel {occupied[x, y]}"
                occupied[x, y] = panel["id"]
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel["targets"], where
        assert panel["datasource"] == via_variable, where
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), where
        for target in panel["targets"]:
            assert target["datasource"] == via_variable, where
            assert target["expr"].strip(), where
    for var in variables.values():
        if var["type"] == "query":
            assert var["datasource"] == via_variable, var["name"]

    # Every $variable used is defined, or one of Grafana's own.
    for _, where, query in expressions(dashboard):
        for name in re.findall(r"\$(\w+)", MACROS.sub("", query)):
            assert name in variables, f"{where}: ${name} is not a dashboard variable"


# -- against a live server ------------------------------------------------------------------------

#: A Python model: OUT = IN, and an error for a negative IN (a BACKEND failure).
ECHO = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if (x < 0).any():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative input")))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return responses
"""
ECHO_CONFIG = """
name: "echo"
backend: "python"
max_batch_size: 4
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 2 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
response_cache { enable: true }
"""


def scrape(text: str) -> dict[str, set[str]]:
    """Sample name -> the label names its samples carry, from the Prometheus text format."""
    series: dict[str, set[str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s", line)
        assert match, line
        labels = set(re.findall(r'([a-zA-Z_]\w*)="(?:[^"\\]|\\.)*"', match.group(2) or ""))
        series.setdefault(match.group(1), set()).update(labels)
    return series


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, set[str]]]:
    root = tmp_path_factory.mktemp("grafana")
    (root / "models" / "echo" / "1").mkdir(parents=True)
    (root / "models" / "echo" / "1" / "model.py").write_text(ECHO)
    (root / "models" / "echo" / "config.pbtxt").write_text(ECHO_CONFIG)
    server = ServerProcess(
        [root / "models"],
        "--metrics-config",
        "histogram_latencies=true",
        "--cache-config",
        "local,size=1048576",
        log=root / "server.log",
    )
    try:
        with httpx.Client(base_url=f"http://{server.url}", timeout=10) as client:

            def infer(values: list[int]) -> int:
                body = {"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1, 2], "data": values}]}
                return client.post("/v2/models/echo/infer", json=body).status_code

            assert [infer([1, 2]), infer([1, 2]), infer([3, 4])] == [200, 200, 200]  # a miss, a hit
            assert infer([-1, 0]) != 200
            stats = client.get("/v2/models/echo/stats").json()["model_stats"][0]["inference_stats"]
            assert (stats["fail"]["count"], stats["cache_hit"]["count"]) == (1, 1), stats
            yield scrape(httpx.get(server.metrics_url, timeout=10).text)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


EXPRESSIONS = expressions(load())


@pytest.mark.parametrize(("where", "query"), [e[1:] for e in EXPRESSIONS], ids=[e[0] for e in EXPRESSIONS])
def test_every_metric_the_dashboard_names_is_exported(
    exported: dict[str, set[str]], where: str, query: str
) -> None:
    found = selectors(query)
    assert found, f"{where}: no metric in {query!r}"
    for name, labels in found:
        if name not in exported and name in GPU_ONLY:
            assert f'"{name}"' in METRICS_SOURCE.read_text(), f"{name} is no longer a tritonpy metric"
            have = GPU_ONLY[name]
        else:
            assert name in exported, f"{where}: {name} is not exported by tritonpy"
            have = exported[name]
        missing = labels - have - TARGET_LABELS
        assert not missing, f"{where}: {name} has no label {sorted(missing)} (it has {sorted(have)})"
