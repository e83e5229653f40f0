"""tritonpy on Ray Serve (``rayserve.py``) against a real local Ray cluster.

One cluster for the module (``ray.init`` with 2 CPUs, Serve's HTTP proxy on a
free loopback port) and one application of two replicas over a copy of the
example repository, in explicit model control: tritonclient through Ray's
proxy, the deployment handle, both replicas serving, model control that reaches
every replica (HTTP and handle), and a replica killed under load, replaced by Ray
with the same models.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tritonpy_serverprocess import free_port
from tritonpy_wait import wait_until

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
pytest.importorskip("tritonpy_backend_onnx")

from tritonpy.rayserve import build_app, delete_control_logs  # noqa: E402

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).parents[2] / "examples" / "model_repository"
A = np.arange(16, dtype=np.int32).reshape(1, 16)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local Ray cluster with Serve on a free port, running the app; the proxy's host:port."""
    repo = tmp_path_factory.mktemp("models")
    shutil.copytree(EXAMPLES / "simple", repo / "simple")
    shutil.copytree(EXAMPLES / "simple", repo / "later")
    (repo / "later" / "config.pbtxt").write_text(
        (repo / "later" / "config.pbtxt").read_text().replace('name: "simple"', 'name: "later"')
    )
    port = free_port()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="tritonpy-test")
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        app = build_app(
            repo,
            replicas=2,
            num_cpus=0.5,
            model_control_mode="explicit",
            load_model=["simple"],
            control_poll_s=0.2,
        )
        serve.run(app, name="tritonpy", route_prefix="/")
        yield f"127.0.0.1:{port}"
    finally:
        serve.shutdown()
        delete_control_logs("tritonpy")
        ray.shutdown()


def handle() -> Any:
    return serve.get_app_handle("tritonpy")


def test_tritonclient_through_rays_proxy(cluster: str) -> None:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(cluster)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("simple")
    assert [i["name"] for i in client.get_model_metadata("simple")["inputs"]] == ["INPUT0", "INPUT1"]
    assert client.get_model_config("simple")["max_batch_size"] == 8
    for binary in (True, False):
        inputs = [httpclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        for i in inputs:
            i.set_data_from_numpy(A, binary_data=binary)
        outputs = [httpclient.InferRequestedOutput("OUTPUT1", binary_data=binary)]
        result = client.infer("simple", inputs, outputs=outputs)
        assert (result.as_numpy("OUTPUT1") == 0).all()
    with pytest.raises(Exception, match="unknown model"):
        client.infer("nosuch", inputs)
    client.close()


def test_the_handle_infers_and_both_replicas_serve(cluster: str) -> None:
    out = handle().infer.remote("simple", {"INPUT0": A, "INPUT1": A}).result()
    assert set(out) == {"OUTPUT0", "OUTPUT1"} and (out["OUTPUT0"] == 2 * A).all()
    answered = {handle().replica_id.remote().result() for _ in range(40)}
    assert len(answered) == 2


def index_everywhere(name: str) -> set[str]:
    """The state of ``name`` in every replica that answers 30 calls."""
    states = set()
    for _ in range(30):
        index = handle().repository_index.remote().result()
        states |= {e.get("state", "") for e in index if e["name"] == name}
    return states


def test_model_control_reaches_every_replica(cluster: str) -> None:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(cluster)
    assert not client.is_model_ready("later")
    client.load_model("later")  # one replica takes it; the log brings it to the other
    wait_until(lambda: index_everywhere("later") == {"READY"}, "every replica loaded 'later'", timeout=60)
    handle().unload_model.remote("later").result()
    wait_until(lambda: index_everywhere("later") == {"UNAVAILABLE"}, "every replica unloaded", timeout=60)
    client.close()


def test_a_replica_killed_under_load_is_replaced_with_the_same_models(cluster: str) -> None:
    handle().load_model.remote("later").result()
    before = {handle().replica_id.remote().result() for _ in range(30)}
    victim = sorted(before)[0]
    actor = next(a for a in ray.util.list_named_actors(all_namespaces=True) if victim in a["name"])
    # Under load: two callers, one request in flight each, for a bounded time.
    failures: list[str] = []
    done = [0]
    stop = threading.Event()

    def caller() -> None:
        deadline = time.monotonic() + 20
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                handle().infer.remote("simple", {"INPUT0": A, "INPUT1": A}).result(timeout_s=30)
                done[0] += 1
            except Exception as exc:
                failures.append(type(exc).__name__)

    callers = [threading.Thread(target=caller) for _ in range(2)]
    for t in callers:
        t.start()
    wait_until(lambda: done[0] > 20, "requests flow")
    ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]), no_restart=True)
    served_at_kill = done[0]
    wait_until(lambda: done[0] > served_at_kill + 50, "requests go on after the kill", timeout=60)
    stop.set()
    for t in callers:
        t.join()
    # Only what was in flight on the killed replica failed: at most one request per caller.
    assert len(failures) <= len(callers), failures

    def replaced() -> bool:
        ids = {handle().replica_id.remote().result() for _ in range(20)}
        return len(ids) == 2 and victim not in ids

    wait_until(replaced, "Ray replaced the killed replica", timeout=90, step=0.5)
    # The new replica replayed the model-control log: it serves 'later' too.
    wait_until(lambda: index_everywhere("later") == {"READY"}, "the new replica loaded 'later'", timeout=60)
    out = handle().infer.remote("later", {"INPUT0": A, "INPUT1": A}).result()
    assert (out["OUTPUT0"] == 2 * A).all()
