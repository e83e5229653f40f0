"""``enable_custom_tracing``: the identity backend reports identity.cc's custom trace activities
for each traced request (``InferenceRequest.report_activity``), which the trace file shows in
the order reported; an untraced request gets none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tritonpy
from tritonpy_traces import read_traces

CONFIG = """
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU } ]
parameters [
  { key: "enable_custom_tracing" value { string_value: "true" } },
  { key: "nested_span_count" value { string_value: "2" } },
  { key: "single_activity_frequency" value { string_value: "2" } }
]
"""


def test_a_traced_request_gets_identity_cc_s_custom_activities(tmp_path: Path) -> None:
    (tmp_path / "repo" / "custom" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "custom" / "config.pbtxt").write_text(CONFIG)
    trace_file = tmp_path / "trace.json"
    server = tritonpy.Server(
        model_repository=[tmp_path / "repo"],
        trace_config=["level=TIMESTAMPS", "rate=2", f"triton,file={trace_file}"],
    )
    x = np.arange(3, dtype=np.int32).reshape(1, 3)
    with server:
        for i in range(2):  # the second is traced (rate 2), the first is not
            out = server.model("custom").predict({"INPUT0": x}, request_id=f"r{i}")
            np.testing.assert_array_equal(out["OUTPUT0"], x)
    (record,) = read_traces(trace_file)
    assert record["request_id"] == "r1"
    names = [t["name"] for t in record["timestamps"]]
    custom = [n for n in names if n.startswith("CUSTOM_")]
    assert custom == [
        "CUSTOM_ACTIVITY_START",
        "CUSTOM_ACTIVITY_END",
        "CUSTOM_SINGLE_ACTIVITY",
        "CUSTOM_ACTIVITY0_START",
        "CUSTOM_SINGLE_ACTIVITY",  # every second nested span (0 % 2 == 0)
        "CUSTOM_ACTIVITY1_START",
        "CUSTOM_ACTIVITY1_END",
        "CUSTOM_ACTIVITY0_END",
    ]
    # Reported during the execution: between the request's start and its end.
    assert names.index("REQUEST_START") < names.index("CUSTOM_ACTIVITY_START") < names.index("REQUEST_END")
