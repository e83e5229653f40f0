"""A tree model loaded with the fastest library installed for its format.

=====================  =========================  ================================
model_type             first choice               fallback
=====================  =========================  ================================
xgboost_json, _ubj     XGBoost ``inplace_predict``  Treelite GTIL
xgboost (binary)       XGBoost (a file XGBoost      Treelite GTIL (XGBoost 3.1+
                       >= 2 wrote: UBJSON inside)   reads no legacy binary)
lightgbm               LightGBM's predictor (one  Treelite GTIL
                       row: its single-row API)
treelite_checkpoint    Treelite GTIL              —
=====================  =========================  ================================

Every forest answers ``predict`` with the model's transformed output as FIL
computes it before its own post-processing: shape ``(n, num_classes)``, where
``num_classes`` is 1 for a binary classifier or a regressor (Treelite's
convention, which FIL follows). ``shap`` gives SHAP values in margin space,
``(n, num_classes * (num_features + 1))``, the bias last for each class.
The libraries are called through ctypes, which releases the GIL: instances
run in parallel.

Threads: ``cpu_nthread`` (every core this process may run on when <= 0) is
the most one prediction uses. Every library here splits a batch by rows, so
a batch gets only the threads its rows can keep busy (``Threads``): one row,
or a batch too small to be worth a parallel region, runs on the calling
thread. An OpenMP team started for one row does no useful work on its other
threads, yet they spin after it ends, taking cores from the server's own
threads (on a 2-core host that cost about 2 ms of CPU per one-row request).
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tritonpy_sdk import TritonError

from ._gtil import Gtil
from ._lgb_row import SingleRow
from ._params import Options

#: The extra of this package that brings each library.
EXTRAS = {"xgboost": "xgboost", "lightgbm": "lightgbm", "treelite": "treelite"}


def available_cores() -> int:
    """The CPUs this process may run on: what "every core" means (OpenMP's default too)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1


def openmp_threads() -> int:
    """The most threads Treelite lets a prediction have: what OpenMP gives a parallel region
    (``omp_get_max_threads``), ``OMP_NUM_THREADS`` when set, else every core."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else available_cores()


#: Tree evaluations (rows x trees) one more thread must get to be worth a parallel region:
#: about 0.1 to 0.3 ms of work, well above what starting and joining a team costs.
WORK_PER_THREAD = 4096

#: XGBoost's CPU predictor splits a batch into blocks of this many rows, one block per thread.
XGBOOST_BLOCK_ROWS = 64


@dataclass(frozen=True, slots=True)
class Threads:
    """How many threads a prediction of some rows uses: at most ``limit`` (``cpu_nthread``,
    or every core), at most one per row, and one more per ``WORK_PER_THREAD`` tree evaluations."""

    limit: int
    trees: int

    @classmethod
    def create(cls, cpu_nthread: int, trees: int, most: int | None = None) -> Threads:
        """``most``: a cap the library enforces (Treelite refuses more than OpenMP's threads)."""
        limit = cpu_nthread if cpu_nthread > 0 else available_cores()
        return cls(max(1, min(limit, most or limit)), max(1, trees))

    def __call__(self, rows: int) -> int:
        return max(1, min(self.limit, rows, rows * self.trees // WORK_PER_THREAD))


class Forest(Protocol):
    """What the backend needs of a loaded tree model."""

    library: str
    num_features: int
    num_classes: int

    def predict(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]: ...

    def shap(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]: ...


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _missing_library(model: str, model_type: str, libraries: tuple[str, ...]) -> TritonError:
    extras = " or ".join(f"pip install 'tritonpy-backend-fil[{EXTRAS[lib]}]'" for lib in libraries)
    return TritonError.unavailable(
        f"model '{model}' (model_type \"{model_type}\") needs {' or '.join(libraries)}, which is not "
        f"installed: {extras}"
    )


def model_file(path: Path, options: Options, model: str) -> Path:
    """The model file: ``path`` itself, or the model type's default file in a version folder."""
    if path.is_dir():
        path = path / options.model_file
    if not path.is_file():
        raise TritonError.unavailable(f"unable to find '{path}' for model '{model}'")
    return path


def _is_legacy_binary(path: Path) -> bool:
    """XGBoost's legacy binary format; XGBoost 2+ writes UBJSON (``{``) even to ``.model`` files."""
    with open(path, "rb") as f:
        return f.read(1) != b"{"


def load_forest(path: Path, options: Options, model: str, gpu_device: int | None = None) -> Forest:
    """Load ``path`` as ``options.model_type`` with the best library installed."""
    kind = options.model_type
    xgb, lgb, tl = _import("xgboost"), _import("lightgbm"), _import("treelite")
    try:
        if kind.startswith("xgboost"):
            legacy = kind == "xgboost" and _is_legacy_binary(path)
            if xgb is not None and not legacy:
                return XGBoostForest(xgb, path, options, gpu_device, tl)
            if tl is not None:
                return TreeliteForest(tl, _treelite_model(tl, path, options), options)
            if legacy and xgb is not None:
                raise TritonError.unavailable(
                    f"model '{model}': {path.name} is in XGBoost's legacy binary format, which XGBoost "
                    f"{xgb.__version__} cannot read: pip install 'tritonpy-backend-fil[treelite]' to "
                    "serve it, or re-save it as JSON or UBJSON"
                )
            raise _missing_library(model, kind, ("xgboost", "treelite"))
        if kind == "lightgbm":
            if lgb is not None:
                return LightGBMForest(lgb, path, options)
            if tl is not None:
                return TreeliteForest(tl, _treelite_model(tl, path, options), options)
            raise _missing_library(model, kind, ("lightgbm", "treelite"))
        if tl is None:
            raise _missing_library(model, kind, ("treelite",))
        return TreeliteForest(tl, _treelite_model(tl, path, options), options)
    except TritonError:
        raise
    except Exception as exc:  # each library raises its own error types for a bad file
        raise TritonError.invalid_arg(
            f"unable to load model '{model}': {path.name} is not a valid {kind} model: {exc}"
        ) from None


def _treelite_model(tl: Any, path: Path, options: Options) -> Any:
    kind = options.model_type
    if kind == "xgboost" and _is_legacy_binary(path):
        return tl.frontend.load_xgboost_model_legacy_binary(path)
    if kind.startswith("xgboost"):
        # By content, as XGBoost reads it: an "xgboost.model" written by XGBoost >= 2 is UBJSON.
        fmt = "json" if path.read_bytes()[:2] == b'{"' else "ubjson"
        return tl.frontend.load_xgboost_model(
            path, format_choice=fmt, allow_unknown_field=options.xgboost_allow_unknown_field
        )
    if kind == "lightgbm":
        return tl.frontend.load_lightgbm_model(path)
    return tl.Model.deserialize(str(path))


def _softmax(margin: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    shifted = np.exp(margin - margin.max(axis=1, keepdims=True))
    out: np.ndarray[Any, Any] = (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)
    return out


#: Up to this many rows, Treelite's GTIL predicts an XGBoost model faster than XGBoost's own
#: predictor on a CPU (whose fixed cost per call is ~0.3 ms for 500 trees; GTIL's ~0.09 ms at one
#: row, even at 8 rows; measured with bench/fil_backend.py's model).
SMALL_BATCH = 8


class XGBoostForest:
    """An XGBoost Booster, predicting in place (no DMatrix) on CPU or with the CUDA predictor.

    On a CPU, with Treelite installed, small batches (``SMALL_BATCH`` rows or fewer) run on
    the same trees converted to Treelite and predicted by GTIL: the same output (to float32
    rounding) at a third of the latency at one row.
    """

    library = "xgboost"

    def __init__(
        self, xgb: Any, path: Path, options: Options, gpu_device: int | None, tl: Any = None
    ) -> None:
        self._xgb = xgb
        booster = xgb.Booster()
        # From a buffer: XGBoost tells JSON from UBJSON by content, with no warning about the
        # file's extension (Triton's names, or a custom default_model_filename).
        booster.load_model(bytearray(path.read_bytes()))
        learner = json.loads(booster.save_config())["learner"]
        params = learner["learner_model_param"]
        self.num_features = int(params["num_feature"])
        if int(params.get("num_target", "1")) > 1:
            raise TritonError.unsupported(f"{path.name}: multi-target models are not supported by FIL")
        num_class = int(params.get("num_class", "0"))
        self.num_classes = num_class if num_class > 1 else 1
        # multi:softmax predicts class indices; FIL gives probabilities (softmax of the margins).
        self._softmax = learner["objective"]["name"] == "multi:softmax"
        #: Threads of the GTIL path (batches of up to SMALL_BATCH rows).
        self._threads = Threads.create(
            options.cpu_nthread, _xgboost_trees(learner["gradient_booster"]), openmp_threads()
        )
        self._nthread = options.cpu_nthread if options.cpu_nthread > 0 else -1
        #: The booster's nthread for a batch larger than one block: cpu_nthread, or XGBoost's
        #: default (0: every core, within the container's CPU quota).
        self._many = max(options.cpu_nthread, 0)
        settings: dict[str, Any] = {}
        if gpu_device is not None:
            if not xgb.build_info().get("USE_CUDA"):
                raise TritonError.unavailable(
                    f"this XGBoost ({xgb.__version__}) has no CUDA support: for KIND_GPU instances "
                    "install the full build (pip install xgboost) instead of xgboost-cpu"
                )
            settings["device"] = f"cuda:{gpu_device}"
        #: The nthread set on the booster now (set again only when it changes: XGBoost then
        #: reconfigures, about 0.2 ms).
        self._booster_nthread = 1 if gpu_device is None else self._many
        settings["nthread"] = self._booster_nthread
        booster.set_param(settings)
        self._booster = booster
        self._small: Any = None
        self._tl = tl
        self._gpu = gpu_device is not None
        if tl is not None and gpu_device is None:
            try:
                self._small = Gtil(tl, tl.frontend.from_xgboost(booster))
            except Exception:  # a model Treelite cannot convert: XGBoost serves every batch
                self._small = None

    def _use_threads(self, nthread: int) -> None:
        if nthread != self._booster_nthread:
            self._booster.set_param({"nthread": nthread})
            self._booster_nthread = nthread

    def predict(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        rows = x.shape[0]
        if self._small is not None and rows <= SMALL_BATCH:
            small = self._small.predict(x, self._threads(rows))
            return np.asarray(small, dtype=np.float32).reshape(rows, -1)
        kind = "margin" if self._softmax else "value"
        if self._gpu:
            # Host data for a CUDA booster: through a DMatrix (inplace_predict would warn of
            # mismatched devices and fall back to one anyway).
            dmatrix = self._xgb.DMatrix(x, missing=np.nan, nthread=self._nthread)
            out = self._booster.predict(dmatrix, output_margin=self._softmax, strict_shape=True)
        else:
            # One block of rows runs on one thread whatever nthread says: no team for it.
            self._use_threads(1 if rows <= XGBOOST_BLOCK_ROWS else self._many)
            out = self._booster.inplace_predict(x, predict_type=kind, strict_shape=True)
        out = np.asarray(out, dtype=np.float32).reshape(rows, -1)
        return _softmax(out) if self._softmax else out

    def shap(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        if not self._gpu:
            self._use_threads(1 if x.shape[0] <= 1 else self._many)  # SHAP splits by rows
        dmatrix = self._xgb.DMatrix(x, missing=np.nan, nthread=self._nthread)
        contribs = self._booster.predict(dmatrix, pred_contribs=True)
        return np.asarray(contribs, dtype=np.float32).reshape(x.shape[0], -1)


def _xgboost_trees(booster_config: dict[str, Any]) -> int:
    """The trees of an XGBoost model from its ``gradient_booster`` config (dart nests gbtree's);
    1 for a linear booster."""
    gbtree = booster_config.get("gbtree", booster_config)
    return int(gbtree.get("gbtree_model_param", {}).get("num_trees", "1"))


class LightGBMForest:
    """A LightGBM Booster and its own predictor."""

    library = "lightgbm"

    def __init__(self, lgb: Any, path: Path, options: Options) -> None:
        self._booster = lgb.Booster(model_file=str(path))
        self.num_features = int(self._booster.num_feature())
        self.num_classes = int(self._booster.num_model_per_iteration())
        self._threads = Threads.create(options.cpu_nthread, int(self._booster.num_trees()))
        #: One row through LightGBM's single-row C API (None: this LightGBM has none).
        self._row: SingleRow | None = None
        try:
            self._row = SingleRow(lgb, self._booster, self.num_features, self.num_classes)
        except Exception:  # an older or unusual LightGBM: Booster.predict serves every batch
            self._row = None

    def predict(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        row = self._row
        if row is not None and x.shape[0] == 1 and x.ndim == 2 and x.shape[1] == self.num_features:
            return row.predict(np.ascontiguousarray(x, dtype=np.float32))
        out = self._booster.predict(x, num_threads=self._threads(x.shape[0]))
        return np.asarray(out, dtype=np.float32).reshape(x.shape[0], -1)

    def shap(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        out = self._booster.predict(x, pred_contrib=True, num_threads=min(self._threads.limit, x.shape[0]))
        return np.asarray(out, dtype=np.float32).reshape(x.shape[0], -1)


class TreeliteForest:
    """A Treelite model run by GTIL, Treelite's CPU inference library (what FIL runs on a CPU)."""

    library = "treelite"

    def __init__(self, tl: Any, model: Any, options: Options) -> None:
        self._gtil = Gtil(tl, model)
        header = model.get_header_accessor()
        if int(header.get_field("num_target")[0]) > 1:
            raise TritonError.unsupported("multi-target models are not supported by FIL")
        self.num_features = int(header.get_field("num_feature")[0])
        self.num_classes = int(header.get_field("num_class")[0])
        self._threads = Threads.create(options.cpu_nthread, int(model.num_tree), openmp_threads())

    def predict(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        out = self._gtil.predict(x, self._threads(x.shape[0]))
        return np.asarray(out, dtype=np.float32).reshape(x.shape[0], -1)

    def shap(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        raise TritonError.unsupported("treeshap_output needs XGBoost or LightGBM; Treelite has no SHAP")


def fil_output(
    probs: np.ndarray[Any, Any], options: Options, num_classes: int, width: int
) -> np.ndarray[Any, Any]:
    """``output__0`` from the model's output, as FIL post-processes it.

    A regressor's output as it is; a classifier with ``predict_proba`` its
    probabilities (a binary one as ``[1 - p, p]`` when the output has 2
    columns); without it the class: the most probable of several, or for a
    binary classifier 1 where ``p > threshold``, else 0.
    """
    if not options.is_classifier:
        return probs
    if options.predict_proba:
        if num_classes == 1 and width == 2:
            out = np.empty((probs.shape[0], 2), dtype=np.float32)
            out[:, 0] = 1.0 - probs[:, 0]
            out[:, 1] = probs[:, 0]
            return out
        return probs
    if num_classes > 1:
        classes: np.ndarray[Any, Any] = probs.argmax(axis=1).astype(np.float32).reshape(-1, 1)
        return classes
    decided: np.ndarray[Any, Any] = (probs > options.threshold).astype(np.float32)
    return decided


def output_widths(options: Options, num_classes: int) -> tuple[int, ...]:
    """The widths ``output__0`` may have: the first is what auto-complete writes."""
    if options.is_classifier and options.predict_proba:
        return (2, 1) if num_classes == 1 else (num_classes,)
    if options.is_classifier:
        return (1,)
    return (num_classes,)
