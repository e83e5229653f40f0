"""The log's line layout: Triton's preamble, ``file:line]``, the message a JSON string
(no client-chosen text can forge a line) unless ``TRITON_SERVER_ESCAPE_LOG_MESSAGES=0``,
and server-made objects (a model configuration) unescaped after their heading."""

from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import Iterator

import pytest
from tritonpy.logsettings import ESCAPE_VARIABLE, OBJECT, LogSettings, LogState

# NVIDIA's L0_logging patterns for a record (log_format_test.py; the ISO 8601 file non-greedy
# here, so that a forged "file:line] " inside a message cannot pass for the record's own).
DEFAULT = re.compile(
    r"(?P<level>\w)(?P<month>\d{2})(?P<day>\d{2}) (?P<timestamp>\d{2}:\d{2}:\d{2}\.\d{6}) (?P<pid>\d+) "
    r"(?P<file>[\w\.]+):(?P<line>\d+)] (?P<message>.*)",
    re.DOTALL,
)
ISO8601 = re.compile(
    r"(?P<stamp>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z) (?P<level>\w+) (?P<pid>\d+) "
    r"(?P<file>.+?):(?P<line>\d+)] (?P<message>.*)",
    re.DOTALL,
)
FORGED = "I0205 18:34:18.707423 1 file.cc:123] THIS ENTRY WAS INJECTED"
CONTROL = "\u001b[31mESC-INJECTION\u001b[0m\u0007"
NAME = "tritonpy_test_log_format"


def _capture(monkeypatch: pytest.MonkeyPatch, escape: str | None, log_format: str = "default") -> io.StringIO:
    if escape is None:
        monkeypatch.delenv(ESCAPE_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(ESCAPE_VARIABLE, escape)
    stream = io.StringIO()
    LogSettings(LogState(log_format=log_format, log_verbose_level=1)).install((NAME,), stream=stream)
    logging.getLogger(NAME).setLevel(logging.DEBUG)
    return stream


@pytest.fixture(autouse=True)
def _detach() -> Iterator[None]:
    yield
    logger = logging.getLogger(NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logging.getLogger("tritonpy").setLevel(logging.NOTSET)


def _records(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_a_message_is_a_json_string_after_the_file_and_line(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = _capture(monkeypatch, None)
    logging.getLogger(NAME).warning("model '%s' said \"%s\"\tthere", "m", "hi")
    (line,) = _records(stream)
    match = DEFAULT.fullmatch(line)
    assert match, line
    assert match["level"] == "W" and match["file"] == "test_log_format.py" and int(match["line"]) > 0
    assert json.loads(match["message"]) == "model 'm' said \"hi\"\tthere"
    assert match["message"] == '"model \'m\' said \\"hi\\"\\tthere"'


def test_the_time_is_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """As Triton's ``gmtime_r``, whatever the host's time zone."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        stream = _capture(monkeypatch, None)
        logger = logging.getLogger(NAME)
        record = logger.makeRecord(NAME, logging.INFO, "x.py", 7, "m", (), None)
        record.created = 31 * 86400 + 3600.25  # 1970-02-01 01:00:00.25 UTC
        logger.handle(record)
        assert _records(stream)[0].startswith("I0201 01:00:00.250000 ")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@pytest.mark.parametrize("text", [f"\n{FORGED}\n{FORGED}", f"\n{FORGED.replace('INJECTED', CONTROL)}\n"])
@pytest.mark.parametrize("log_format", ["default", "ISO8601"])
def test_a_message_cannot_forge_a_record(monkeypatch: pytest.MonkeyPatch, text: str, log_format: str) -> None:
    stream = _capture(monkeypatch, "1", log_format)
    logging.getLogger(NAME).error("unexpected inference input '%s'", text)
    (line,) = _records(stream)  # one line: the newlines are written as \n
    match = (DEFAULT if log_format == "default" else ISO8601).fullmatch(line)
    assert match and match["level"] == "E", line
    assert json.loads(match["message"]) == f"unexpected inference input '{text}'"
    assert "\u001b" not in line and "\u0007" not in line


def test_unescaped_when_the_variable_is_0(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = _capture(monkeypatch, "0")
    logging.getLogger(NAME).info("input '%s'", f"\n{FORGED}")
    lines = _records(stream)
    assert len(lines) == 2 and lines[0].endswith("] input '") and lines[1] == f"{FORGED}'"


def test_any_other_value_escapes(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = _capture(monkeypatch, "false")  # Triton compares with "0" alone
    logging.getLogger(NAME).info("a\nb")
    (line,) = _records(stream)
    assert line.endswith('] "a\\nb"')


@pytest.mark.parametrize("escape", ["1", "0"])
def test_an_object_follows_its_heading_unescaped(monkeypatch: pytest.MonkeyPatch, escape: str) -> None:
    stream = _capture(monkeypatch, escape)
    config = 'name: "m"\ninput {\n  name: "X"\n}\n'
    logging.getLogger(NAME).debug("Server side auto-completed config: ", extra={OBJECT: config})
    lines = _records(stream)
    heading = "Server side auto-completed config: "
    heading = json.dumps(heading) if escape == "1" else heading
    assert lines[0].endswith("] " + heading), lines
    assert stream.getvalue().split("\n", 1)[1] == config + "\n"  # + the record's line end
    # A table: no heading at all, the object from the next line on.
    stream.truncate(0)
    stream.seek(0)
    logging.getLogger(NAME).info("", extra={OBJECT: "+---+\n| a |\n+---+"})
    assert _records(stream)[0].endswith("] ") and _records(stream)[1:] == ["+---+", "| a |", "+---+"]


def test_an_exception_is_inside_the_escaped_message(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = _capture(monkeypatch, None)
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        logging.getLogger(NAME).exception("execute failed")
    (line,) = _records(stream)
    message = json.loads(DEFAULT.fullmatch(line)["message"])  # type: ignore[index]
    assert message.startswith("execute failed\nTraceback") and message.endswith("ValueError: bad\nvalue")
