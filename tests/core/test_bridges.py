"""``bridges.Answer``: the one response a blocked ``Server.infer`` waits for."""

from __future__ import annotations

import threading

import pytest
from tritonpy.bridges import Answer
from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, InferenceResponse


def test_an_answer_set_before_the_wait_is_returned_at_once() -> None:
    answer = Answer()
    response = InferenceResponse()
    answer.done(response, RESPONSE_COMPLETE_FINAL)
    assert answer.wait(0) is response


def test_an_answer_set_from_another_thread_wakes_the_waiter() -> None:
    answer = Answer()
    response = InferenceResponse()
    waiting = threading.Event()

    def later() -> None:
        waiting.wait(10)
        answer.done(response, RESPONSE_COMPLETE_FINAL)

    thread = threading.Thread(target=later)
    thread.start()
    waiting.set()
    assert answer.wait(30) is response
    thread.join(10)


def test_many_answers_across_threads_lose_no_wakeup() -> None:
    """Set and wait race on every round: either order, the waiter gets its response."""
    answers = [Answer() for _ in range(2000)]

    def setter() -> None:
        for answer in answers:
            answer.done(InferenceResponse(id="x"), RESPONSE_COMPLETE_FINAL)

    thread = threading.Thread(target=setter)
    thread.start()
    for answer in answers:
        assert answer.wait(30).id == "x"
    thread.join(10)


def test_no_answer_times_out_and_a_second_set_raises() -> None:
    answer = Answer()
    with pytest.raises(TimeoutError):
        answer.wait(0.01)
    answer.done(InferenceResponse(), RESPONSE_COMPLETE_FINAL)
    with pytest.raises(RuntimeError):
        answer.done(InferenceResponse(), RESPONSE_COMPLETE_FINAL)


def test_done_without_a_response_sets_nothing() -> None:
    answer = Answer()
    answer.done(None, RESPONSE_COMPLETE_FINAL)
    with pytest.raises(TimeoutError):
        answer.wait(0.01)
