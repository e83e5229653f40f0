"""The stub's reading turn: ``LinkReader.drain`` takes what the socket already holds."""

from __future__ import annotations

import multiprocessing
from typing import Any

from triton_python_backend_utils._reader import LinkReader
from triton_python_backend_utils._wire import Link


def _pair() -> tuple[Link, Link]:
    server, stub = multiprocessing.Pipe()
    # No tensors cross in these messages: neither side needs an arena.
    return Link(server, None, None), Link(stub, None, None)  # type: ignore[arg-type]


def test_drain_hands_on_what_is_there_and_keeps_main_messages_for_next() -> None:
    server, stub = _pair()
    dispatched: list[dict[str, Any]] = []

    def dispatch(msg: dict[str, Any]) -> bool:
        if msg["op"] == "cancel":
            dispatched.append(msg)
            return True
        return False

    reader = LinkReader(stub, dispatch, lambda: False, lambda exc: None)
    reader.drain()  # nothing there: returns at once
    for msg in ({"op": "exec", "b": 1}, {"op": "cancel", "t": 7}, {"op": "exec", "b": 2}):
        server.send(msg)
    assert reader.next() == {"op": "exec", "b": 1}
    assert dispatched == []  # the cancellation is still in the socket
    reader.drain()
    assert dispatched == [{"op": "cancel", "t": 7}]
    assert not stub.conn.poll(0)  # everything read
    assert reader.next() == {"op": "exec", "b": 2}  # kept for the main thread, in order
