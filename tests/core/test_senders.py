"""``SenderBatch``: response senders made on first read, closed once the batch is done."""

from __future__ import annotations

import numpy as np
import pytest
from tritonpy.runtime.senders import SenderBatch
from tritonpy.scheduler import Job
from tritonpy_sdk import DataType, InferenceRequest, Tensor, TritonError


def _jobs(count: int) -> list[Job]:
    tensor = Tensor("IN", np.zeros(1, np.float32), DataType.FP32)
    return [
        Job(InferenceRequest("m", 1, {"IN": tensor}), lambda *a: None, 0, None, None, 0) for _ in range(count)
    ]


def test_a_sender_is_made_on_first_read_only() -> None:
    jobs = _jobs(3)
    batch = SenderBatch(None, jobs, 0, decoupled=False)  # type: ignore[arg-type]
    assert all(job.request._sender is None for job in jobs)
    second = jobs[1].request
    sender = second.response_sender
    assert sender is not None and not sender.closed
    assert second.response_sender is sender  # the same one on every read
    assert jobs[0].request._sender is None and jobs[2].request._sender is None
    assert not batch.any_sent()


def test_after_close_every_sender_is_closed_and_the_batch_let_go() -> None:
    jobs = _jobs(2)
    batch = SenderBatch(None, jobs, 0, decoupled=True)  # type: ignore[arg-type]
    made = jobs[0].request.response_sender
    batch.close()
    assert made is not None and made.closed
    late = jobs[1].request.response_sender  # never read during execute
    assert late is not None and late.closed and late.decoupled
    with pytest.raises(TritonError):
        late.send(flags=1)
    # Nothing of the request reaches its batch any more (no reference cycle).
    assert all(getattr(job.request._sender_source, "__self__", None) is not batch for job in jobs)
