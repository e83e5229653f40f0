"""Request JSON read as Triton reads it: rapidjson's words and offsets for a malformed
document, and the document ending at a NUL byte. Each message below is Triton 2.51's
answer to the same body (observed on the reference server)."""

from __future__ import annotations

import json

import pytest
from tritonpy.http.json_body import PREFIX, loads, syntax_error
from tritonpy_sdk import ErrorCode, TritonError

I0 = b'{"name":"INPUT0","datatype":"FP32","shape":[4],"data":[1,2,3,4]}'
I1 = b'{"name":"INPUT1","datatype":"FP32","shape":[4],"data":[1,2,3,4]}'

TRITON_2_51 = [
    (b"   ", "The document is empty. at 3"),
    (b"\0{}", "The document is empty. at 0"),
    (b'{"inputs": [tru]}', "Invalid value. at 15"),
    (b'{"inputs": [], 5: 1}', "Missing a name for object member. at 15"),
    (b'{"inputs" []}', "Missing a colon after a name of object member. at 10"),
    (b'{"inputs": [] "x": 1}', "Missing a comma or '}' after an object member. at 14"),
    (b'{"inputs": [' + I0 + b" " + I1 + b"]}", "Missing a comma or ']' after an array element. at 77"),
    (b'{"inputs": [], "id": "abc', "Missing a closing quotation mark in string. at 25"),
    (b'{"inputs": [], "id": "a\x01b"}', "Invalid escape character in string. at 23"),
    (b'{"inputs": [], "id": "a\\qb"}', "Invalid escape character in string. at 23"),
    (b'{"inputs": [], "id": "a\\u12G4"}', "Incorrect hex digit after \\u escape in string. at 23"),
    (
        b'{"inputs": [' + I0 + b"," + I1 + b"]}\xff",
        "The document root must not be followed by other values. at 143",
    ),
    (b'{"inputs": [], "x": 1.}', "Miss fraction part in number. at 22"),
    (b'{"inputs": [], "x": 1e}', "Miss exponent in number. at 22"),
    (b'{"inputs": [{"name": "x"', "Missing a comma or '}' after an object member. at 24"),
    ('{"inputs": [], "id": "ééé" "x": 1}'.encode(), "Missing a comma or '}' after an object member. at 30"),
    (b"{'inputs': []}", "Missing a name for object member. at 1"),
    (b'{"inputs": [],}', "Missing a name for object member. at 14"),
    (b'{"inputs": [1,]}', "Invalid value. at 14"),
    (b'{"inputs": []}xyz', "The document root must not be followed by other values. at 14"),
]


@pytest.mark.parametrize(("body", "words"), TRITON_2_51)
def test_rapidjson_words_and_offsets(body: bytes, words: str) -> None:
    with pytest.raises(TritonError) as err:
        loads(body)
    assert err.value.code is ErrorCode.INVALID_ARG
    assert err.value.message == PREFIX + words


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": [1, -0, 2.5e3, 1E-400, NaN, Infinity, -Infinity, Inf, -Inf]}',
        b'["\\ud83d\\ude00", "\\n\\t\\"\\\\\\/", true, false, null, {}]',
        b"\xef\xbb\xbf{}",
        b" \n\t\r[] ",
    ],
)
def test_documents_rapidjson_reads_raise_no_error(body: bytes) -> None:
    assert syntax_error(body) is None


@pytest.mark.parametrize(
    ("body", "words"),
    [  # Triton 2.51's answers; Python's json reads some (1e999, surrogates): the walk is asked
        (b'{"inputs": [], "x": 1e999}', "Number too big to be stored in double. at 20"),
        (b"1" * 400, "Number too big to be stored in double. at 0"),
        (b'["\\ud800x"]', "The surrogate pair in string is invalid. at 2"),
        (b'["\\ud800\\u0041"]', "The surrogate pair in string is invalid. at 2"),
        (b"[-]", "Invalid value. at 2"),
        (b"[NaX]", "Invalid value. at 3"),
        (b"[Infinit]", "Invalid value. at 8"),
        # ... and these Triton 2.51 reads (9e308 as infinity, a lone low surrogate as is)
        (b"9e308", None),
        (b'{"a": -Inf}', None),
        (b'{"a": -NaN}', None),
        (b'["\\udc00"]', None),
    ],
)
def test_what_only_rapidjson_refuses_or_reads(body: bytes, words: str | None) -> None:
    assert syntax_error(body) == words


def test_the_document_ends_at_a_nul() -> None:
    doc = {"inputs": [{"name": "INPUT0", "parameters": {"binary_data_size": 4}}]}
    assert loads(json.dumps(doc).encode() + b"\0\xff\xfe\x01") == doc


def test_strings_that_are_not_utf8_are_refused_in_rapidjsons_words() -> None:
    """A difference from Triton, which passes such bytes on: Python's json checks them."""
    with pytest.raises(TritonError, match=r"Invalid encoding in string\. at 9$"):
        loads(b'{"id": "a\xff"}')


def test_nesting_too_deep_for_python_is_named() -> None:
    with pytest.raises(TritonError, match="nested too deeply"):
        loads(b"[" * 100_000)


def test_object_pairs_hook_is_applied() -> None:
    assert loads(b'{"a": 1, "a": 2}', object_pairs_hook=lambda pairs: pairs) == [("a", 1), ("a", 2)]
