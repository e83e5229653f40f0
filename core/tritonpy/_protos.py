"""The descriptor pool of tritonpy's protobuf messages.

Our messages live in a private pool, not protobuf's default one: tritonclient's
gRPC module (and grpcio-health-checking) register the same ``inference.*`` and
``grpc.health.v1.*`` names in the default pool, and both must work in one process
(embedding, tests, a Python model that imports tritonclient).
``scripts/gen_protos.sh`` points the generated modules here.

The message classes are built by :func:`build_messages`, not by protobuf's
``builder.BuildTopDescriptorsAndMessages``: that one registers every class in the
*default* symbol database, which under the pure-Python protobuf implementation
(``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python``, which some packages set for
their subprocesses) adds our descriptors to the default pool, where tritonclient's
copies then conflict with them.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pool, symbol_database
from google.protobuf import message as _message
from google.protobuf import reflection as _reflection
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.internal import enum_type_wrapper

POOL = descriptor_pool.DescriptorPool()
_SYMBOLS = symbol_database.SymbolDatabase(pool=POOL)


def build_messages(file: FileDescriptor, module_name: str, module: dict[str, Any]) -> None:
    """What the generated ``_pb2`` module would get from protobuf's builder: the
    top-level enums (a wrapper and each value), extensions, service descriptors and
    message classes of ``file`` in ``module`` -- registered with :data:`POOL`'s own
    symbol database only."""
    for name, enum in file.enum_types_by_name.items():
        module[f"_{name.upper()}"] = enum
        module[name] = enum_type_wrapper.EnumTypeWrapper(enum)
        for value in enum.values:
            module[value.name] = value.number
    for name, extension in file.extensions_by_name.items():
        module[f"{name.upper()}_FIELD_NUMBER"] = extension.number
        module[name] = extension
    for name, service in file.services_by_name.items():
        module[f"_{name.upper()}"] = service
    for name, message in file.message_types_by_name.items():
        module[name] = _message_class(message, module_name, "")


def _message_class(message: Descriptor, module_name: str, prefix: str) -> type:
    attributes: dict[str, Any] = {
        name: _message_class(nested, module_name, f"{prefix}{message.name}.")
        for name, nested in message.nested_types_by_name.items()
    }
    attributes.update(DESCRIPTOR=message, __module__=module_name, __qualname__=prefix + message.name)
    cls: type = _reflection.GeneratedProtocolMessageType(message.name, (_message.Message,), attributes)
    _SYMBOLS.RegisterMessage(cls)
    return cls
