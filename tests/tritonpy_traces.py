"""Reading a trace file as NVIDIA's tools do (``trace_summary.py``): Triton's file has an
object per timestamp and one with the trace's model, all keyed by ``id``; merged here into
one record per trace, in id order, its ``timestamps`` in file order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The core's stamps of one request answered once, in the order they are taken.
CORE_STAMPS = [
    "REQUEST_START",
    "QUEUE_START",
    "COMPUTE_START",
    "COMPUTE_INPUT_END",
    "COMPUTE_OUTPUT_START",
    "COMPUTE_END",
    "INFER_RESPONSE_COMPLETE",  # handed back to its caller, as Triton's front ends stamp it
    "REQUEST_END",
]


def read_traces(path: Path) -> list[dict[str, Any]]:
    merged: dict[int, dict[str, Any]] = {}
    for entry in json.loads(path.read_text()):
        record = merged.setdefault(entry["id"], {"id": entry["id"], "timestamps": []})
        for key, value in entry.items():
            if key == "timestamps":
                record["timestamps"] += value
            elif key != "id":
                record[key] = value
    return [merged[i] for i in sorted(merged)]
