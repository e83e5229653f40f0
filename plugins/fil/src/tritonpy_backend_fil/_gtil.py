"""Treelite's GTIL on dense rows, through its C API bound once per model.

``treelite.gtil.predict`` does per call what never changes for a loaded model:
it parses a JSON configuration into a new C object, asks the model its input
and output types (three calls into the library) and the output's shape. For
one row of a 500-tree model that is half the call (about 65 µs of 130).
``Gtil`` does that once and calls ``TreeliteGTILPredict`` (Treelite's public C
API) directly; the library releases the GIL there as in Treelite's wrapper.
Where this Treelite is not laid out as expected (no loaded library to bind, an
input type other than float32 or float64), it calls ``treelite.gtil.predict``.
"""

from __future__ import annotations

import ctypes
import json
from typing import Any

import numpy as np

_DTYPES: dict[str, np.dtype[Any]] = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}


class Gtil:
    """``predict(x, nthread)``: what ``treelite.gtil.predict(model, x, nthread=nthread)``
    returns (the model's output transform applied), shape ``(rows, num_target, classes)``."""

    def __init__(self, tl: Any, model: Any) -> None:
        self._tl = tl
        self._model = model
        self._configs: dict[int, ctypes.c_void_p] = {}
        self._lib: Any = getattr(getattr(tl, "core", None), "_LIB", None)
        try:
            self._input = _DTYPES[model.input_type]
            self._output = _DTYPES[model.output_type]
            self._num_feature = int(model.num_feature)
            self._tail = self._output_shape(1)[1:]
        except (KeyError, AttributeError, TypeError, RuntimeError):  # not the layout expected
            self.__del__()
            self._lib = None
        self._input_name = self._input.name.encode() if self._lib is not None else b""

    @property
    def direct(self) -> bool:
        """Whether predictions go straight to the C API (else through Treelite's wrapper)."""
        return self._lib is not None

    def predict(self, x: np.ndarray[Any, Any], nthread: int) -> np.ndarray[Any, Any]:
        lib = self._lib
        if lib is None or x.ndim != 2 or x.shape[1] != self._num_feature:
            # The wrapper pads a narrower input with missing values, and says what is wrong
            # with any other.
            return np.asarray(self._tl.gtil.predict(self._model, x, nthread=nthread))
        x = np.ascontiguousarray(x, dtype=self._input)
        rows = x.shape[0]
        out: np.ndarray[Any, Any] = np.zeros((rows, *self._tail), dtype=self._output)
        self._check(
            lib.TreeliteGTILPredict(
                self._model.handle,
                ctypes.c_void_p(x.ctypes.data),
                self._input_name,
                ctypes.c_uint64(rows),
                ctypes.c_void_p(out.ctypes.data),
                self._config(nthread),
            )
        )
        return out

    def _config(self, nthread: int) -> ctypes.c_void_p:
        config = self._configs.get(nthread)
        if config is None:
            config = ctypes.c_void_p()
            text = json.dumps({"predict_type": "default", "nthread": nthread}).encode()
            self._check(self._lib.TreeliteGTILParseConfig(text, ctypes.byref(config)))
            self._configs[nthread] = config
        return config

    def _output_shape(self, rows: int) -> tuple[int, ...]:
        shape = ctypes.POINTER(ctypes.c_uint64)()
        ndim = ctypes.c_uint64()
        self._check(
            self._lib.TreeliteGTILGetOutputShape(
                self._model.handle,
                ctypes.c_uint64(rows),
                self._config(1),
                ctypes.byref(shape),
                ctypes.byref(ndim),
            )
        )
        return tuple(int(shape[i]) for i in range(ndim.value))

    def _check(self, status: int) -> None:
        if status != 0:
            message = self._lib.TreeliteGetLastError()
            raise RuntimeError(
                message.decode(errors="replace") if isinstance(message, bytes) else str(message)
            )

    def __del__(self) -> None:
        lib, configs = getattr(self, "_lib", None), getattr(self, "_configs", {})
        if lib is not None:
            try:
                for config in configs.values():
                    lib.TreeliteGTILDeleteConfig(config)
            except Exception:  # the library is going away with the interpreter
                pass
            configs.clear()
