"""``InferenceRequest.report_activity``: nothing outside a trace; inside, the name and a
timestamp of the server's clock (``time.monotonic_ns``) or the one given."""

from __future__ import annotations

import time

from tritonpy_sdk import InferenceRequest


def test_an_untraced_request_records_nothing() -> None:
    request = InferenceRequest("m", 1, {})
    assert not request.traced
    request.report_activity("X_START")  # no trace: nothing to record, no error


def test_a_traced_request_records_the_name_and_the_time() -> None:
    seen: list[tuple[str, int]] = []
    request = InferenceRequest("m", 1, {})
    request._trace_activity = lambda name, ns: seen.append((name, ns))  # as the core sets it
    assert request.traced
    before = time.monotonic_ns()
    request.report_activity("STEP_START")
    request.report_activity("GIVEN", 42)
    assert seen[0][0] == "STEP_START" and before <= seen[0][1] <= time.monotonic_ns()
    assert seen[1] == ("GIVEN", 42)
