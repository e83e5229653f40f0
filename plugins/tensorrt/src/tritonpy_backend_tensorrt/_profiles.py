"""Choosing an instance's optimization profile for a batch, and checking the batch's shapes.

An instance runs with the profiles its instance group names (``profile: ["1"]``;
profile 0 by default). For each batch, as Triton does, the profile whose
``opt`` shapes are nearest (Manhattan distance over every input dimension)
among those whose [min, max] range holds the batch's shapes is chosen; when
none holds them, the batch fails with Triton's message for the first profile:
``request specifies invalid shape for input 'X' for m_0. Error details: model
expected the shape of dimension 0 to be between 1 and 8 but received 16``. A shape
tensor's values count as shapes do (``_shapes.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tritonpy_sdk import TritonError

from ._config import range_problem
from ._engine import ProfileShapes
from ._shapes import values_distance, values_problem

Shapes = Mapping[str, tuple[int, ...]]


def profile_distance(profile: ProfileShapes, shapes: Shapes, values: Shapes | None = None) -> int | None:
    """How far ``shapes`` (and a shape tensor's ``values``) lie from the profile's ``opt``
    shapes (values); None when out of its range."""
    distance = values_distance(profile.values, values) if values else 0
    if distance is None:
        return None
    for name, shape in shapes.items():
        if name not in profile.shapes:
            continue
        if range_problem(shape, profile.min(name), profile.max(name)):
            return None
        distance += sum(abs(o - d) for o, d in zip(profile.opt(name), shape))
    return distance


def choose_profile(
    where: str, profiles: Sequence[tuple[str, ProfileShapes]], shapes: Shapes, values: Shapes | None = None
) -> tuple[str, ProfileShapes]:
    """The (name, profile) of ``profiles`` to run ``shapes`` (input name → full shape) with,
    and ``values`` (shape tensor input name → the values the engine gets)."""
    best: tuple[int, int] | None = None
    for i, (_, profile) in enumerate(profiles):
        distance = profile_distance(profile, shapes, values)
        if distance is not None and (best is None or distance < best[0]):
            best = (distance, i)
    if best is not None:
        return profiles[best[1]]
    _, first = profiles[0]
    for name, shape in shapes.items():
        if name in first.shapes:
            problem = range_problem(shape, first.min(name), first.max(name))
            if problem:
                raise TritonError.invalid_arg(
                    f"request specifies invalid shape for input '{name}' for {where}. "
                    f"Error details: {problem}"
                )
    for name, given in (values or {}).items():
        if name in first.values:
            low, _, high = first.values[name]
            problem = values_problem(given, low, high)
            if problem:
                raise TritonError.invalid_arg(problem)
    raise TritonError.internal(f"no optimization profile of {where} holds the request's shapes")


def profile_names(profiles: Sequence[tuple[str, ProfileShapes]]) -> str:
    """The profiles as Triton lists them: ``[ 0[0] 1[1]]``."""
    return "[" + "".join(f" {name}[{p.index}]" for name, p in profiles) + "]"
