"""Triton's FIL model parameters: names, defaults, validation, and where each applies.

``parameters { key: "model_type" value { string_value: "xgboost_json" } }`` in
``config.pbtxt``, under the names of the current FIL backend documentation
(Triton 25.09 and later). Booleans are the strings ``"true"`` / ``"false"``.

The parameters FIL removed in 25.09 are still read, with a warning naming
their replacement: ``output_class`` (now ``is_classifier``; when both are
given ``output_class`` wins, as in Triton), ``algo`` (``layout``),
``threads_per_tree`` (``chunk_size``), ``storage_type`` and
``blocks_per_sm``. The GPU-only tuning parameters (``layout``,
``chunk_size``, ``transfer_threshold`` and the removed ones) are validated
and accepted; they change nothing on a CPU, nor with XGBoost's CUDA
predictor. A key this backend does not know is reported at load (Triton
ignores it silently; it usually is a misspelling).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tritonpy_sdk import TritonError

#: model_type value -> the file Triton's FIL backend looks for in a version folder.
MODEL_FILES = {
    "xgboost": "xgboost.model",
    "xgboost_json": "xgboost.json",
    "xgboost_ubj": "xgboost.ubj",
    "lightgbm": "model.txt",
    "treelite_checkpoint": "checkpoint.tl",
}

#: Parameters removed in Triton 25.09 -> their replacement ("" for none).
REMOVED = {
    "output_class": "is_classifier",
    "algo": "layout",
    "threads_per_tree": "chunk_size",
    "storage_type": "",
    "blocks_per_sm": "",
}

#: GPU-only parameters: validated, accepted, and without effect here.
GPU_ONLY = (
    "layout",
    "chunk_size",
    "transfer_threshold",
    "algo",
    "threads_per_tree",
    "storage_type",
    "blocks_per_sm",
)

LAYOUTS = ("depth_first", "breadth_first", "layered")
ALGOS = ("ALGO_AUTO", "NAIVE", "TREE_REORG", "BATCH_TREE_REORG")
STORAGE_TYPES = ("AUTO", "DENSE", "SPARSE", "SPARSE8")

#: Every key this backend reads, with its default as the docs give it.
KNOWN = {
    "model_type": "xgboost",
    "is_classifier": "(required)",
    "predict_proba": "false",
    "threshold": "0.5",
    "xgboost_allow_unknown_field": "false",
    "cpu_nthread": "-1 (every core)",
    "use_experimental_optimizations": "false",
    "layout": "depth_first",
    "chunk_size": "1",
    "transfer_threshold": "0",
    **{k: "(removed in Triton 25.09)" for k in REMOVED},
}


def _bool(params: dict[str, str], key: str, model: str, default: bool | None) -> bool | None:
    value = params.get(key)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise TritonError.invalid_arg(
        f'model \'{model}\': parameter \'{key}\' must be "true" or "false", got "{value}"'
    )


def _int(params: dict[str, str], key: str, model: str, default: int) -> int:
    value = params.get(key)
    if value is None or value == "":
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise TritonError.invalid_arg(
            f"model '{model}': parameter '{key}' must be an integer, got \"{value}\""
        ) from None


def _choice(params: dict[str, str], key: str, model: str, choices: tuple[str, ...], default: str) -> str:
    value = params.get(key)
    if value is None or value == "":
        return default
    if value not in choices:
        raise TritonError.invalid_arg(
            f"model '{model}': parameter '{key}' must be one of {', '.join(choices)}, got \"{value}\""
        )
    return value


@dataclass(frozen=True, slots=True)
class Options:
    """A FIL model's parameters, parsed and checked."""

    model_type: str
    is_classifier: bool
    predict_proba: bool
    threshold: float
    xgboost_allow_unknown_field: bool
    #: Threads per prediction; <= 0 means every core (FIL's -1).
    cpu_nthread: int
    use_experimental_optimizations: bool
    layout: str
    chunk_size: int
    transfer_threshold: int

    @property
    def model_file(self) -> str:
        """The default file name of this model type in a version folder."""
        return MODEL_FILES[self.model_type]

    @classmethod
    def parse(cls, params: dict[str, str], model: str, log: logging.Logger | None = None) -> Options:
        """Parse ``params`` (the config's parameters as strings); log what is removed or unknown."""
        for key, replacement in REMOVED.items():
            if params.get(key):
                if log is not None:
                    log.warning(
                        "model '%s': the `%s` parameter has been removed in the 25.09 release of "
                        "Triton's FIL backend.%s",
                        model,
                        key,
                        f" Use `{replacement}` instead." if replacement else "",
                    )
        if log is not None:
            unknown = sorted(k for k in params if k not in KNOWN)
            if unknown:
                log.warning(
                    "model '%s': unknown FIL parameter(s) %s ignored; known: %s",
                    model,
                    ", ".join(repr(k) for k in unknown),
                    ", ".join(KNOWN),
                )
        model_type = params.get("model_type") or "xgboost"
        if model_type not in MODEL_FILES:
            raise TritonError.invalid_arg(
                f"model '{model}': unknown model_type \"{model_type}\"; expected one of "
                + ", ".join(MODEL_FILES)
            )
        # The removed name wins when both are given, as in Triton's FIL backend.
        old = _bool(params, "output_class", model, None)
        current = _bool(params, "is_classifier", model, None)
        is_classifier = old if old is not None else current
        if is_classifier is None:
            raise TritonError.invalid_arg(
                f"model '{model}': Required parameter is_classifier not found in config (Triton's "
                'words): set it to "true" for a classifier, "false" for a regressor'
            )
        threshold_text = params.get("threshold") or "0.5"
        try:
            threshold = float(threshold_text)
        except ValueError:
            raise TritonError.invalid_arg(
                f"model '{model}': parameter 'threshold' must be a number, got \"{threshold_text}\""
            ) from None
        chunk = _int(params, "chunk_size", model, 1)
        if chunk < 1 or chunk > 32 or chunk & (chunk - 1):
            raise TritonError.invalid_arg(
                f"model '{model}': parameter 'chunk_size' must be a power of 2 from 1 to 32, got {chunk}"
            )
        per_tree = _int(params, "threads_per_tree", model, 1)
        if per_tree < 1 or per_tree & (per_tree - 1):
            raise TritonError.invalid_arg(
                f"model '{model}': parameter 'threads_per_tree' must be a power of 2, got {per_tree}"
            )
        transfer = _int(params, "transfer_threshold", model, 0)
        if transfer < 0:
            raise TritonError.invalid_arg(
                f"model '{model}': parameter 'transfer_threshold' must be >= 0, got {transfer}"
            )
        if _int(params, "blocks_per_sm", model, 0) < 0:
            raise TritonError.invalid_arg(f"model '{model}': parameter 'blocks_per_sm' must be >= 0")
        _choice(params, "algo", model, ALGOS, "ALGO_AUTO")
        _choice(params, "storage_type", model, STORAGE_TYPES, "AUTO")
        return cls(
            model_type=model_type,
            is_classifier=is_classifier,
            predict_proba=bool(_bool(params, "predict_proba", model, False)),
            threshold=threshold,
            xgboost_allow_unknown_field=bool(_bool(params, "xgboost_allow_unknown_field", model, False)),
            cpu_nthread=_int(params, "cpu_nthread", model, -1),
            use_experimental_optimizations=bool(
                _bool(params, "use_experimental_optimizations", model, False)
            ),
            layout=_choice(params, "layout", model, LAYOUTS, "depth_first"),
            chunk_size=chunk,
            transfer_threshold=transfer,
        )
