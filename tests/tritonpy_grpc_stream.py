"""One gRPC ``ModelStreamInfer`` stream in tests, with ``tritonclient``: what came back, in order."""

from __future__ import annotations

import queue
from typing import Any

import tritonclient.grpc as grpcclient


def is_final(result: Any) -> bool:
    """Whether ``result`` carries the FINAL flag (``triton_final_response``)."""
    return bool(result.get_response().parameters["triton_final_response"].bool_param)


class Stream:
    """A stream asking for empty final responses, so that every request's end is seen."""

    def __init__(self, url: str) -> None:
        self.client = grpcclient.InferenceServerClient(url)
        self.got: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self.client.start_stream(callback=self._put)
        self.cancelled = False

    def _put(self, result: Any, error: Any) -> None:
        self.got.put((result, error))

    def send(self, model: str, inputs: list[Any], request_id: str = "", **kwargs: Any) -> None:
        self.client.async_stream_infer(
            model, inputs, request_id=request_id, enable_empty_final_response=True, **kwargs
        )

    def next(self) -> tuple[Any, Any]:
        return self.got.get(timeout=30)

    def until_final(self, count: int = 1) -> list[tuple[Any, Any]]:
        """Every (result, error) up to the ``count``-th final flag."""
        got: list[tuple[Any, Any]] = []
        while count:
            result, error = self.next()
            got.append((result, error))
            count -= int(result is not None and is_final(result))
        return got

    def results_until_final(self, count: int = 1) -> list[Any]:
        """Every result up to the ``count``-th final flag; an error raises."""
        results: list[Any] = []
        while count:
            result, error = self.next()
            if error is not None:
                raise error
            results.append(result)
            count -= int(is_final(result))
        return results

    def cancel(self) -> None:
        """End the stream, cancelling its requests in flight (tritonclient's way)."""
        self.client.stop_stream(cancel_requests=True)
        self.cancelled = True

    def close(self) -> None:
        if not self.cancelled:
            self.client.stop_stream()
        self.client.close()
