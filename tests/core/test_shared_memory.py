"""The registry of system shared-memory regions (``tritonpy.memory.shared``), without a server.

Messages and codes are those Triton 2.51 answers for the same calls (checked
against the real server); the front ends' tests run them over HTTP and gRPC.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm
from tritonpy.memory import SystemSharedMemory
from tritonpy.memory.region import check_bounds
from tritonpy_sdk import DataType, ErrorCode, TritonError

PAGE = 4096


@pytest.fixture
def key() -> Iterator[str]:
    """A POSIX shared-memory object of 2 pages holding 0..2047 as INT32."""
    name = f"/tritonpy-test-{os.getpid()}-{id(object())}"
    handle = shm.create_shared_memory_region("test", name, 2 * PAGE)
    shm.set_shared_memory_region(handle, [np.arange(2 * PAGE // 4, dtype=np.int32)])
    yield name
    shm.destroy_shared_memory_region(handle)


def _error(call: object, code: ErrorCode, message: str) -> None:
    with pytest.raises(TritonError) as info:
        call()  # type: ignore[operator]
    assert (info.value.code, info.value.message) == (code, message)


def test_register_status_unregister(key: str) -> None:
    memory = SystemSharedMemory()
    memory.register("a", key, 0, 64)
    assert memory.status() == [{"name": "a", "key": key, "offset": 0, "byte_size": 64}]
    assert memory.status("a") == memory.status()
    memory.unregister("unknown")  # no error, as in Triton
    memory.unregister("a")
    assert memory.status() == []


def test_registration_errors(key: str) -> None:
    memory = SystemSharedMemory()
    memory.register("a", key, 0, 64)
    _error(
        lambda: memory.register("a", key, 0, 64),
        ErrorCode.ALREADY_EXISTS,
        "shared memory region 'a' already in manager",
    )
    # Triton 2.51 maps each key once; a second name for it is refused.
    _error(
        lambda: memory.register("b", key, 0, 64), ErrorCode.INTERNAL, f"Invalid shared memory region: '{key}'"
    )
    memory.unregister()
    _error(
        lambda: memory.register("x", "/tritonpy-no-such-key", 0, 64),
        ErrorCode.INTERNAL,
        "Unable to open shared memory region: '/tritonpy-no-such-key'",
    )
    failed = "failed to register shared memory region 'x': "
    _error(lambda: memory.register("x", key, PAGE, 2 * PAGE), ErrorCode.INVALID_ARG, failed + "invalid args")
    _error(lambda: memory.register("x", key, 4 * PAGE, 16), ErrorCode.INVALID_ARG, failed + "invalid args")
    einval = failed + "unable to process address spaceInvalid argument"
    _error(
        lambda: memory.register("x", key, 16, 16), ErrorCode.INVALID_ARG, einval
    )  # mmap needs page offsets
    _error(lambda: memory.register("x", key, 0, 0), ErrorCode.INVALID_ARG, einval)
    _error(lambda: memory.status("x"), ErrorCode.NOT_FOUND, "Unable to find system shared memory region: 'x'")
    assert memory.status() == []


@pytest.mark.parametrize("bad", ["/../../etc/passwd", "/a/b", "..", "/."])
def test_keys_name_only_objects_in_dev_shm(bad: str) -> None:
    _error(
        lambda: SystemSharedMemory().register("x", bad, 0, 16),
        ErrorCode.INTERNAL,
        f"Unable to open shared memory region: '{bad}'",
    )


@pytest.mark.parametrize("bad", ["/", "///", ""])
def test_a_key_of_only_slashes_is_refused_as_triton_refuses_it(bad: str) -> None:
    _error(
        lambda: SystemSharedMemory().register("x", bad, 0, 16),
        ErrorCode.INVALID_ARG,
        f"cannot register shared memory region 'x' - invalid shm key '{bad}'",
    )


@pytest.mark.parametrize("key", ["triton_python_backend_shm_region_a", "//triton_python_backend_shm_region_"])
def test_the_python_backends_own_keys_are_reserved(key: str) -> None:
    """As Triton since 2.61 (NVIDIA's L0_shared_memory test_register_reserved_names)."""
    _error(
        lambda: SystemSharedMemory().register("x", key, 0, 16),
        ErrorCode.INVALID_ARG,
        f"cannot register shared memory region 'x' with key '{key}' as the key contains the reserved "
        "prefix 'triton_python_backend_shm_region_'",
    )


def test_a_key_without_its_slash_is_the_same_object(key: str) -> None:
    memory = SystemSharedMemory()
    memory.register("a", key.lstrip("/"), PAGE, PAGE)  # shm_open takes both spellings
    params = {"shared_memory_region": "a", "shared_memory_byte_size": 16}
    array = memory.input_tensor("IN", DataType.INT32, [4], params).data
    assert array.tolist() == [1024, 1025, 1026, 1027]


def test_inputs_are_read_only_views_and_bounds_are_checked(key: str) -> None:
    memory = SystemSharedMemory()
    memory.register("a", key, 0, 2 * PAGE)
    params = {"shared_memory_region": "a", "shared_memory_offset": 64, "shared_memory_byte_size": 16}
    array = memory.input_tensor("IN", DataType.INT32, [1, 4], params).data
    assert array.tolist() == [[16, 17, 18, 19]]
    assert not array.flags.writeable and not array.flags.owndata
    for offset, size in ((2 * PAGE - 8, 16), (0, 2 * PAGE + 4)):
        params = {
            "shared_memory_region": "a",
            "shared_memory_offset": offset,
            "shared_memory_byte_size": size,
        }
        _error(
            lambda p=params: memory.slice(p),  # type: ignore[misc]
            ErrorCode.INVALID_ARG,
            "Invalid offset + byte size for shared memory region: 'a'",
        )
    _error(
        lambda: memory.slice({"shared_memory_region": "b", "shared_memory_byte_size": 4}),
        ErrorCode.NOT_FOUND,
        "Unable to find shared memory region: 'b'",
    )
    for bad in ({"shared_memory_region": 1}, {"shared_memory_region": "a", "shared_memory_byte_size": -1}):
        with pytest.raises(TritonError) as info:
            memory.slice(bad)
        assert info.value.code is ErrorCode.INVALID_ARG


@pytest.mark.parametrize(
    ("offset", "size", "message"),
    [
        (2 * PAGE, 4, "Invalid offset for shared memory region: 'a'"),
        (-1, 4, "Invalid offset for shared memory region: 'a'"),  # a negative int64 of gRPC
        (
            32,
            2**64 - 32,
            f"Integer overflow detected: byte_size ({2**64 - 32}) + offset (32) exceeds maximum value "
            f"({2**64 - 1}) for region 'a'",
        ),
        (2 * PAGE - 8, 16, "Invalid offset + byte size for shared memory region: 'a'"),
    ],
)
def test_bounds_are_checked_in_tritons_order(key: str, offset: int, size: int, message: str) -> None:
    """Triton's checks and words (NVIDIA's L0_shared_memory): the offset, then the sum
    past 64 bits, then the end of the slice."""
    memory = SystemSharedMemory()
    memory.register("a", key, 0, 2 * PAGE)
    params = {"shared_memory_region": "a", "shared_memory_offset": offset, "shared_memory_byte_size": size}
    _error(lambda: check_bounds("a", 2 * PAGE, offset, size), ErrorCode.INVALID_ARG, message)
    if offset >= 0:  # what a JSON request can say
        _error(lambda: memory.slice(params), ErrorCode.INVALID_ARG, message)


def test_outputs_are_written_and_must_fit(key: str) -> None:
    memory = SystemSharedMemory()
    memory.register("a", key, 0, PAGE)
    slot = memory.output_slot(
        "OUT", {"shared_memory_region": "a", "shared_memory_offset": 8, "shared_memory_byte_size": 12}
    )
    slot.write(np.array([7, 8, 9], np.int32), DataType.INT32)
    reader = SystemSharedMemory()
    reader.register("r", key, 0, PAGE)
    assert reader.input_tensor(
        "x", DataType.INT32, [5], {"shared_memory_region": "r", "shared_memory_byte_size": 20}
    ).data.tolist() == [0, 1, 7, 8, 9]
    _error(
        lambda: slot.write(np.arange(4, dtype=np.int32), DataType.INT32),
        ErrorCode.INTERNAL,
        "shared memory size specified with the request for output 'OUT' (12 bytes) should be at least "
        "16 bytes to hold the results",
    )


def test_bytes_tensors_in_regions(key: str) -> None:
    memory = SystemSharedMemory()
    memory.register("a", key, 0, PAGE)
    strings = np.array([b"one", b"", b"three"], dtype=np.object_)
    size = sum(4 + len(s) for s in strings)
    params = {"shared_memory_region": "a", "shared_memory_offset": 100, "shared_memory_byte_size": size}
    memory.output_slot("OUT", params).write(strings, DataType.BYTES)
    assert memory.input_tensor("IN", DataType.BYTES, [3], params).data.tolist() == [b"one", b"", b"three"]


def test_unregistered_regions_stay_mapped_while_in_use(key: str) -> None:
    client_maps = _maps_of(key)  # the test's own handle
    memory = SystemSharedMemory()
    memory.register("a", key, 0, PAGE)
    params = {"shared_memory_region": "a", "shared_memory_byte_size": 16}
    array = memory.input_tensor("IN", DataType.INT32, [4], params).data  # a request still reading it
    slot = memory.output_slot("OUT", params)  # and one still to write its output
    memory.unregister()
    _error(lambda: memory.slice(params), ErrorCode.NOT_FOUND, "Unable to find shared memory region: 'a'")
    assert array.tolist() == [0, 1, 2, 3]  # the map is still there
    slot.write(np.array([5, 6, 7, 8], np.int32), DataType.INT32)
    assert array.tolist() == [5, 6, 7, 8]
    assert _maps_of(key) == client_maps + 1
    del array, slot
    gc.collect()
    assert _maps_of(key) == client_maps  # the last view gone, the map is closed


def _maps_of(key: str) -> int:
    """How many mappings of ``/dev/shm<key>`` this process has."""
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if line.rstrip().endswith("/dev/shm" + key))


def test_only_regular_objects_are_mapped() -> None:
    name = f"tritonpy-test-fifo-{os.getpid()}"
    os.mkfifo(f"/dev/shm/{name}")
    try:
        _error(
            lambda: SystemSharedMemory().register("x", "/" + name, 0, 16),
            ErrorCode.INTERNAL,
            f"Unable to open shared memory region: '/{name}'",
        )
    finally:
        os.unlink(f"/dev/shm/{name}")
