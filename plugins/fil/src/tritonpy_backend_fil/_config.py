"""The model config against the tree model: auto-complete and checks.

FIL models have one input, ``input__0`` (FP32, ``[num_features]``, NaN for
a missing value), and the outputs ``output__0`` (FP32; its width follows
``is_classifier`` / ``predict_proba``) and, optionally, ``treeshap_output``
(FP32, ``[num_classes * (num_features + 1)]``). Auto-complete adds what the
config leaves out, and a batch size when it gives none (the core then turns
the dynamic batcher on, as for every model found to batch).
"""

from __future__ import annotations

from typing import Any

from tritonpy_sdk import Model, TritonError

from ._forest import Forest, output_widths
from ._params import Options

INPUT = "input__0"
OUTPUT = "output__0"
SHAP = "treeshap_output"

#: max_batch_size given to a config without one: tree models batch cheaply, and FIL's
#: documentation advises a large value (its example: 32768).
DEFAULT_MAX_BATCH_SIZE = 32768


def shap_width(forest: Forest) -> int:
    return forest.num_classes * (forest.num_features + 1)


def complete_config(model: Model, forest: Forest, options: Options) -> None:
    """Fill inputs, outputs and ``max_batch_size`` of ``model.config`` from the tree model."""
    config = model.config
    if int(config.get("max_batch_size", 0) or 0) == 0:
        explicit = model.backend.config.get("default-max-batch-size")
        config["max_batch_size"] = int(explicit) if explicit else DEFAULT_MAX_BATCH_SIZE
    inputs = config.setdefault("input", [])
    if not inputs:
        inputs.append({"name": INPUT, "data_type": "TYPE_FP32", "dims": [forest.num_features]})
    outputs = config.setdefault("output", [])
    if not any(o.get("name") == OUTPUT for o in outputs):
        width = output_widths(options, forest.num_classes)[0]
        outputs.insert(0, {"name": OUTPUT, "data_type": "TYPE_FP32", "dims": [width]})
    for entry in inputs + outputs:
        if entry.get("data_type", "TYPE_INVALID") in ("", "TYPE_INVALID"):
            entry["data_type"] = "TYPE_FP32"


def _dims(entry: dict[str, Any]) -> list[int]:
    reshape = entry.get("reshape")
    return [int(d) for d in (reshape.get("shape", []) if reshape else entry.get("dims", []))]


def check_config(model: str, config: dict[str, Any], forest: Forest, options: Options) -> None:
    """Raise INVALID_ARG where ``config`` contradicts the tree model or FIL's conventions."""
    inputs = config.get("input", [])
    names = [str(i.get("name", "")) for i in inputs]
    if names != [INPUT]:
        raise TritonError.invalid_arg(
            f"unable to load model '{model}': a FIL model has exactly one input, '{INPUT}'; "
            f"the configuration gives {', '.join(repr(n) for n in names) or 'none'}"
        )
    outputs = {str(o.get("name", "")): o for o in config.get("output", [])}
    odd = sorted(set(outputs) - {OUTPUT, SHAP})
    if odd or OUTPUT not in outputs:
        raise TritonError.invalid_arg(
            f"unable to load model '{model}': a FIL model's outputs are '{OUTPUT}' and optionally "
            f"'{SHAP}'; the configuration gives {', '.join(repr(n) for n in outputs) or 'none'}"
        )
    for entry in [inputs[0], *outputs.values()]:
        if entry.get("data_type") != "TYPE_FP32":
            raise TritonError.invalid_arg(
                f"unable to load model '{model}', configuration expects datatype "
                f"{entry.get('data_type')} for '{entry.get('name')}', FIL models use TYPE_FP32"
            )
    features = forest.num_features
    if _dims(inputs[0]) not in ([features], [-1]):
        raise TritonError.invalid_arg(
            f"unable to load model '{model}': input '{INPUT}' has dims {_dims(inputs[0])}, but the "
            f"model has {features} features (dims: [ {features} ])"
        )
    widths = output_widths(options, forest.num_classes)
    given = _dims(outputs[OUTPUT])
    if given not in ([w] for w in widths) and given != [-1]:
        what = (
            "probabilities per class (predict_proba)"
            if options.is_classifier and options.predict_proba
            else ("the class" if options.is_classifier else "the regression value")
        )
        raise TritonError.invalid_arg(
            f"unable to load model '{model}': output '{OUTPUT}' has dims {given}, but it holds {what}: "
            f"dims: [ {widths[0]} ]" + (" (or [ 1 ] for the positive class only)" if len(widths) > 1 else "")
        )
    if SHAP in outputs:
        width = shap_width(forest)
        if _dims(outputs[SHAP]) not in ([width], [-1]):
            raise TritonError.invalid_arg(
                f"unable to load model '{model}': output '{SHAP}' has dims {_dims(outputs[SHAP])}, "
                f"expected [ {width} ] (classes x (features + 1))"
            )
        if forest.library == "treelite":
            raise TritonError.unsupported(
                f"unable to load model '{model}': '{SHAP}' needs XGBoost or LightGBM to compute SHAP "
                f"values and this model is served by Treelite (install the model's library: "
                "pip install 'tritonpy-backend-fil[xgboost]' or '[lightgbm]')"
            )
