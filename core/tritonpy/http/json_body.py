"""Reading a request's JSON document as Triton's HTTP front end reads it.

Triton parses request bodies with rapidjson (NaN and Infinity allowed). Two of
its habits reach clients, and tritonpy keeps both:

- the document ends at the first NUL byte, so a JSON header followed by binary
  data that starts with a zero, sent without ``Inference-Header-Content-Length``,
  parses, and the request then fails for its missing binary data;
- a malformed document is named in rapidjson's words with the byte offset where
  it stopped: ``Missing a comma or '}' after an object member. at 14``.

Python's ``json`` does the parsing (it is fast); only when it fails does
:func:`syntax_error` walk the text again, the way rapidjson's reader walks it,
to find rapidjson's error and offset. One difference stays: rapidjson does not
check that strings are UTF-8 and Python's ``json`` does, so a string with bytes
that are not UTF-8 is refused (``Invalid encoding in string.``, rapidjson's
words for it when it validates) where Triton takes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tritonpy_sdk import TritonError

PREFIX = "failed to parse the request JSON buffer: "

#: rapidjson's messages (its ``GetParseError_En``), by the name of its error code.
_EMPTY = "The document is empty."
_NOT_SINGULAR = "The document root must not be followed by other values."
_INVALID_VALUE = "Invalid value."
_MISS_NAME = "Missing a name for object member."
_MISS_COLON = "Missing a colon after a name of object member."
_OBJECT_COMMA = "Missing a comma or '}' after an object member."
_ARRAY_COMMA = "Missing a comma or ']' after an array element."
_BAD_HEX = "Incorrect hex digit after \\u escape in string."
_BAD_SURROGATE = "The surrogate pair in string is invalid."
_BAD_ESCAPE = "Invalid escape character in string."
_MISS_QUOTE = "Missing a closing quotation mark in string."
_BAD_ENCODING = "Invalid encoding in string."
_TOO_BIG = "Number too big to be stored in double."
_MISS_FRACTION = "Miss fraction part in number."
_MISS_EXPONENT = "Miss exponent in number."

_WHITESPACE = b" \n\r\t"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"
_ESCAPES = b'"\\/bfnrt'
_MAX_DOUBLE = 1.7976931348623157e308


def loads(
    text: bytes | bytearray | memoryview,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """``text`` as a JSON document, read as Triton reads it (the document ends at a
    NUL byte); else a :class:`TritonError` (INVALID_ARG) in rapidjson's words."""
    data = bytes(text)
    try:
        try:
            return json.loads(data, object_pairs_hook=object_pairs_hook)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
            failure: ValueError = exc
        nul = data.find(b"\0")
        if nul >= 0:  # rapidjson reads up to the NUL: what comes after is not its business
            data = data[:nul]
            try:
                return json.loads(data, object_pairs_hook=object_pairs_hook)
            except ValueError as exc:
                failure = exc
    except RecursionError:
        raise TritonError.invalid_arg(f"{PREFIX}it is nested too deeply") from None
    raise TritonError.invalid_arg(PREFIX + _describe(data, failure)) from None


def _describe(data: bytes, failure: ValueError) -> str:
    try:
        found = syntax_error(data)
    except RecursionError:
        return "it is nested too deeply"
    if found is not None:
        return found
    if isinstance(failure, UnicodeDecodeError):
        return f"{_BAD_ENCODING} at {failure.start}"
    # What Python's json refuses and rapidjson takes (e.g. "Inf"): Python's words.
    return str(failure)


def syntax_error(data: bytes) -> str | None:
    """rapidjson's error for the document ``data`` (``"<message> at <offset>"``), or
    None where rapidjson would read it."""
    try:
        _Reader(data).document()
    except _Stop as stop:
        return f"{stop.message} at {stop.offset}"
    return None


class _Stop(Exception):
    def __init__(self, message: str, offset: int) -> None:
        self.message = message
        self.offset = offset


class _Reader:
    """rapidjson's recursive reader, reduced to finding where it stops. ``peek``
    answers 0 at the end, as rapidjson's string stream answers its terminator."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 3 if data.startswith(b"\xef\xbb\xbf") else 0

    def peek(self) -> int:
        return self.data[self.at] if self.at < len(self.data) else 0

    def consume(self, char: bytes) -> bool:
        if self.peek() == char[0]:
            self.at += 1
            return True
        return False

    def skip_whitespace(self) -> None:
        while self.at < len(self.data) and self.data[self.at] in _WHITESPACE:
            self.at += 1

    def document(self) -> None:
        self.skip_whitespace()
        if self.peek() == 0:
            raise _Stop(_EMPTY, self.at)
        self.value()
        self.skip_whitespace()
        if self.peek() != 0:
            raise _Stop(_NOT_SINGULAR, self.at)

    def value(self) -> None:
        first = self.peek()
        if first == ord("n"):
            self.literal(b"null")
        elif first == ord("t"):
            self.literal(b"true")
        elif first == ord("f"):
            self.literal(b"false")
        elif first == ord('"'):
            self.string()
        elif first == ord("{"):
            self.object()
        elif first == ord("["):
            self.array()
        else:
            self.number()

    def literal(self, word: bytes) -> None:
        self.at += 1
        for char in word[1:]:
            if self.peek() != char:
                raise _Stop(_INVALID_VALUE, self.at)
            self.at += 1

    def object(self) -> None:
        self.sequence(b"}", self.member, _OBJECT_COMMA)

    def member(self) -> None:
        if self.peek() != ord('"'):
            raise _Stop(_MISS_NAME, self.at)
        self.string()
        self.skip_whitespace()
        if not self.consume(b":"):
            raise _Stop(_MISS_COLON, self.at)
        self.skip_whitespace()
        self.value()

    def array(self) -> None:
        self.sequence(b"]", self.value, _ARRAY_COMMA)

    def sequence(self, close: bytes, item: Callable[[], None], no_comma: str) -> None:
        """An object's members or an array's elements, from the opening bracket to ``close``."""
        self.at += 1
        self.skip_whitespace()
        if self.consume(close):
            return
        while True:
            item()
            self.skip_whitespace()
            if self.consume(b","):
                self.skip_whitespace()
            elif self.consume(close):
                return
            else:
                raise _Stop(no_comma, self.at)

    def string(self) -> None:
        self.at += 1
        while True:
            char = self.peek()
            if char == ord("\\"):
                escape = self.at
                self.at += 1
                if self.peek() and self.peek() in _ESCAPES:
                    self.at += 1
                elif self.consume(b"u"):
                    unit = self.hex4(escape)
                    if 0xD800 <= unit <= 0xDBFF:
                        if not (self.consume(b"\\") and self.consume(b"u")):
                            raise _Stop(_BAD_SURROGATE, escape)
                        if not 0xDC00 <= self.hex4(escape) <= 0xDFFF:
                            raise _Stop(_BAD_SURROGATE, escape)
                else:
                    raise _Stop(_BAD_ESCAPE, escape)
            elif char == ord('"'):
                self.at += 1
                return
            elif char == 0:
                raise _Stop(_MISS_QUOTE, self.at)
            elif char < 0x20:
                raise _Stop(_BAD_ESCAPE, self.at)
            else:
                self.at += 1

    def hex4(self, escape: int) -> int:
        digits = self.data[self.at : self.at + 4]
        if len(digits) < 4 or any(d not in _HEX for d in digits):
            raise _Stop(_BAD_HEX, escape)
        self.at += 4
        return int(digits, 16)

    def digits(self) -> bytes:
        start = self.at
        while self.peek() and self.peek() in _DIGITS:
            self.at += 1
        return self.data[start : self.at]

    def number(self) -> None:
        start = self.at
        self.consume(b"-")
        if self.consume(b"0"):
            pass
        elif self.peek() and self.peek() in b"123456789":
            # rapidjson stops when one more digit could overflow a double.
            whole = self.digits()
            if len(whole) > 308 and float(whole[:-1]) >= _MAX_DOUBLE / 10:
                raise _Stop(_TOO_BIG, start)
        elif self.peek() in (ord("N"), ord("I")):
            self.nan_or_infinity()
            return
        else:
            raise _Stop(_INVALID_VALUE, self.at)
        fraction = b""
        if self.consume(b"."):
            fraction = self.digits()
            if not fraction:
                raise _Stop(_MISS_FRACTION, self.at)
        if self.consume(b"e") or self.consume(b"E"):
            negative = not self.consume(b"+") and self.consume(b"-")
            exponent = self.digits()
            if not exponent:
                raise _Stop(_MISS_EXPONENT, self.at)
            if not negative and (len(exponent) > 6 or int(exponent) > 308 + len(fraction)):
                raise _Stop(_TOO_BIG, start)
        # Triton's rapidjson checks no more than that: 9e308 is read (as infinity).

    def nan_or_infinity(self) -> None:
        if self.consume(b"N"):
            if not (self.consume(b"a") and self.consume(b"N")):
                raise _Stop(_INVALID_VALUE, self.at)
        elif self.consume(b"I"):
            if not (self.consume(b"n") and self.consume(b"f")):
                raise _Stop(_INVALID_VALUE, self.at)
            if self.peek() == ord("i") and not all(self.consume(c) for c in (b"i", b"n", b"i", b"t", b"y")):
                raise _Stop(_INVALID_VALUE, self.at)
