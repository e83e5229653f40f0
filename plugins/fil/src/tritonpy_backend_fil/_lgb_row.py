"""LightGBM's single-row predictor: one row through LightGBM's C API, set up once.

``Booster.predict`` builds a predictor on every call (its parameters parsed, the
input checked and converted): for one row of a 500-tree model it took ~24 µs,
where ``LGBM_BoosterPredictForMatSingleRowFast`` took ~10 µs with its
configuration (``LGBM_BoosterPredictForMatSingleRowFastInit``) made once per
instance. The predictions are the same, bit for bit (the same predictor, the
same iterations, float32 input). The configuration holds a buffer of its own,
so one ``SingleRow`` serves one thread at a time: one per instance.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import numpy as np
from tritonpy_sdk import TritonError

#: LightGBM's C API constants: the model's transformed output, float32 input.
_PREDICT_NORMAL = 0
_DTYPE_FLOAT32 = 0


def _free(lib: Any, config: ctypes.c_void_p, booster: Any) -> None:
    """Free ``config``; ``booster`` is passed only to outlive it."""
    lib.LGBM_FastConfigFree(config)


class SingleRow:
    """One row of float32 features → the model's output for it, as ``Booster.predict``
    (with ``num_iteration`` as it reads it) gives it."""

    def __init__(self, lgb: Any, booster: Any, num_features: int, num_outputs: int) -> None:
        """Raises when this LightGBM has no such C API (then use ``Booster.predict``)."""
        lib = lgb.basic._LIB
        config = ctypes.c_void_p()
        self._lib = lib
        # How many values a row's prediction writes: the buffer below must hold them all.
        length = ctypes.c_int64(0)
        self._check(
            lib.LGBM_BoosterCalcNumPredict(
                booster._handle,
                ctypes.c_int(1),
                ctypes.c_int(_PREDICT_NORMAL),
                ctypes.c_int(0),
                ctypes.c_int(booster.best_iteration),
                ctypes.byref(length),
            )
        )
        if length.value != num_outputs:
            raise ValueError(f"a row predicts {length.value} values, not {num_outputs}")
        self._check(
            lib.LGBM_BoosterPredictForMatSingleRowFastInit(
                booster._handle,
                ctypes.c_int(_PREDICT_NORMAL),
                ctypes.c_int(0),
                ctypes.c_int(booster.best_iteration),  # as Booster.predict reads it
                ctypes.c_int(_DTYPE_FLOAT32),
                ctypes.c_int32(num_features),
                ctypes.c_char_p(b"num_threads=1"),
                ctypes.byref(config),
            )
        )
        weakref.finalize(self, _free, lib, config, booster)
        self._config = config
        self._call = lib.LGBM_BoosterPredictForMatSingleRowFast
        self._out = np.empty(num_outputs, dtype=np.float64)
        self._out_ptr = ctypes.c_void_p(self._out.ctypes.data)
        self._length = ctypes.c_int64(0)
        self._length_ref = ctypes.byref(self._length)

    def _check(self, code: int) -> None:
        if code != 0:
            message = self._lib.LGBM_GetLastError()
            text = message.decode() if isinstance(message, bytes) else str(message)
            raise TritonError.internal(f"LightGBM: {text}")

    def predict(self, row: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """``row``: float32, C-contiguous, ``num_features`` values (the caller checks)."""
        self._check(
            self._call(self._config, ctypes.c_void_p(row.ctypes.data), self._length_ref, self._out_ptr)
        )
        return self._out.astype(np.float32).reshape(1, -1)
