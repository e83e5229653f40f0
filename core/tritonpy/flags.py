"""``tritonserver``'s enums of the in-process API, with its names and values, so code
written for Triton's Python API compares against the same constants.

- ``ModelBatchFlag`` (``ModelHandle.batch_properties()``): ``FIRST_DIM`` when the
  model batches along its first dimension (``max_batch_size`` > 0), else ``UNKNOWN``.
- ``ModelTxnPropertyFlag`` (``ModelHandle.transaction_properties()``): ``ONE_TO_ONE``,
  or ``DECOUPLED`` for a model that sends any number of responses per request.
- ``MetricFormat`` (``Server.metrics()``): ``PROMETHEUS``, the only one.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag


class ModelBatchFlag(IntFlag):
    UNKNOWN = 1
    FIRST_DIM = 2


class ModelTxnPropertyFlag(IntFlag):
    ONE_TO_ONE = 1
    DECOUPLED = 2


class MetricFormat(IntEnum):
    PROMETHEUS = 0
