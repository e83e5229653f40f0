"""Which CUDA graphs an instance captures: ``optimization { cuda { graphs: true } }``.

As Triton's TensorRT backend (``InitializeGraphSpecs``), without ``graph_spec``
entries a model that batches gets graphs for batch sizes 1, its dynamic
batcher's (or the sequence batcher's ``oldest``) preferred batch sizes and
``max_batch_size``; with neither scheduler, 1, 2, 3, 4, 6, 8, 12, 16 and
``max_batch_size`` (those up to ``max_batch_size``); a model that does not
batch gets one graph. Each ``graph_spec`` names a ``batch_size`` and,
optionally, the shapes of inputs with variable dims and a
``graph_lower_bound`` (the smallest batch the graph serves, padded).

A graph is captured for one set of input shapes, so an input dimension that
is still -1 (no ``graph_spec`` shape gives it) takes the profile's ``opt``
size. A batch runs a graph when its shapes equal the graph's, or, with a
lower bound, when only its batch size differs and lies between the bound and
the graph's batch size (the graph's buffers are then filled with the batch's
rows only, and only those rows are answered).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tritonpy_sdk import TritonError

from ._config import config_dims, max_batch_size

_DEFAULT_SIZES = (1, 2, 3, 4, 6, 8, 12, 16)


@dataclass(frozen=True, slots=True)
class GraphSpec:
    """One graph to capture: its batch size (0 for a model that does not batch), the
    smallest batch it serves, and the shapes (without the batch dim) a spec gives."""

    batch_size: int
    lower_bound: int
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


def _cuda(config: dict[str, Any]) -> dict[str, Any]:
    return dict((config.get("optimization") or {}).get("cuda") or {})


def graphs_enabled(config: dict[str, Any]) -> bool:
    return bool(_cuda(config).get("graphs"))


def graph_specs(config: dict[str, Any]) -> list[GraphSpec]:
    """The graphs ``config`` asks for ([] without ``graphs: true``), checked as Triton does."""
    cuda = _cuda(config)
    if not cuda.get("graphs"):
        return []
    limit = max_batch_size(config)
    configured = cuda.get("graph_spec") or []
    if not configured:
        sizes = {0} if limit == 0 else {1}
        dynamic = config.get("dynamic_batching")
        oldest = (config.get("sequence_batching") or {}).get("oldest")
        if dynamic is not None:
            sizes.update(int(b) for b in dynamic.get("preferred_batch_size", []))
        elif oldest is not None:
            sizes.update(int(b) for b in oldest.get("preferred_batch_size", []))
        else:
            sizes.update(_DEFAULT_SIZES)
            if limit == 0:
                sizes.add(0)
        if limit > 0:
            sizes.add(limit)
        return [GraphSpec(b, b) for b in sorted(sizes) if b <= limit]
    specs = []
    for entry in configured:
        batch = int(entry.get("batch_size", 0) or 0)
        shapes = _shapes(entry.get("input") or {})
        bound = entry.get("graph_lower_bound")
        lower = int(bound.get("batch_size", 0) or 0) if bound else batch
        if bound and _shapes(bound.get("input") or {}) not in ({}, shapes):
            raise TritonError.invalid_arg(
                "graph lower bound spec with input shapes other than the graph's is not supported by "
                "the tritonpy TensorRT backend: give the lower bound a 'batch_size' only"
            )
        spec = GraphSpec(batch, lower, shapes)
        _validate(spec, limit)
        specs.append(spec)
    return specs


def _shapes(inputs: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(int(d) for d in (value or {}).get("dim", [])) for name, value in inputs.items()}


def _validate(spec: GraphSpec, limit: int) -> None:
    """Triton's ``ValidateGraphSpec`` messages."""
    if limit == 0:
        if spec.batch_size != 0:
            raise TritonError.invalid_arg("graph spec expects 'batch_size' to be 0 if 'max_batch_size' is 0")
    elif spec.batch_size < 1 or spec.batch_size > limit:
        raise TritonError.invalid_arg(f"graph spec expects 'batch_size' to be >= 1 and <= {limit}")
    if spec.lower_bound > spec.batch_size:
        raise TritonError.invalid_arg(
            "graph lower bound spec expects 'batch_size' to be <= graph spec 'batch_size'"
        )


def graph_shapes(
    spec: GraphSpec,
    config: dict[str, Any],
    opt: Mapping[str, tuple[int, ...]],
) -> dict[str, tuple[int, ...]]:
    """The full input shapes a graph of ``spec`` is captured with: the spec's shapes, else the
    config's dims, a -1 left there taking the profile's ``opt`` size (``opt`` holds full shapes)."""
    batching = max_batch_size(config) > 0
    shapes: dict[str, tuple[int, ...]] = {}
    for entry in config.get("input", []):
        name = str(entry["name"])
        dims = list(spec.shapes.get(name) or config_dims(entry))
        tail = list(opt.get(name, ()))[1:] if batching else list(opt.get(name, ()))
        if len(tail) == len(dims):
            dims = [t if d == -1 else d for d, t in zip(dims, tail)]
        if any(d < 0 for d in dims):
            raise TritonError.invalid_arg(
                f"graph spec of batch size {spec.batch_size} leaves input '{name}' with variable dims "
                f"{list(dims)}: give its shape in 'graph_spec.input'"
            )
        shapes[name] = (spec.batch_size, *dims) if batching else tuple(dims)
    return shapes


@dataclass(frozen=True, slots=True)
class GraphKey:
    """What a batch must match to run a captured graph."""

    profile: int
    #: Each input's shape without its batch dim (the whole shape when the model does not batch).
    tails: tuple[tuple[int, ...], ...]


def find_graph(
    graphs: Sequence[tuple[GraphKey, int, int, Any]], key: GraphKey, batch: int
) -> tuple[Any, int] | None:
    """The captured graph for a batch of ``batch`` rows and ``key``, and its batch size:
    of ``graphs`` ((key, lower bound, batch size, graph), by batch size), an exact match,
    else the smallest whose lower bound admits ``batch``."""
    fallback = None
    for graph_key, lower, size, graph in graphs:
        if graph_key != key:
            continue
        if size == batch:
            return graph, size
        if fallback is None and lower <= batch < size:
            fallback = (graph, size)
    return fallback
