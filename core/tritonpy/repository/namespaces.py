"""Model namespacing (``--model-namespacing``): which model a name means when
several repositories may each hold a model of that name.

Without namespacing a model's key is its name, and a name is in one repository
at most. With it, each repository root is a namespace, a model's key is
``<namespace>::<name>`` (Triton's identifier, as its log prints it), and, as
Triton resolves names:

- a name that a client, BLS or the in-process API gives means the one model of
  that name; two or more is INVALID_ARG, with Triton's message asking for a
  namespace (which none of Triton's protocols can carry); a model unloaded by
  name (or whose folder left) no longer answers to it, as Triton drops its
  identifier then;
- an ensemble's step means the model of that name in the ensemble's own
  repository, else the only model of that name anywhere (Triton's "fuzzy
  match"), looked up again at each request, so a member that comes or goes in
  poll mode is followed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from tritonpy_sdk import TritonError


def model_key(namespace: str, name: str) -> str:
    """A model's key: ``name``, or ``<namespace>::<name>`` under model namespacing."""
    return f"{namespace}::{name}" if namespace else name


def keys_by_name(models: Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """``{name: keys}`` of ``models`` given as ``(key, name)`` pairs."""
    found: dict[str, list[str]] = {}
    for key, name in models:
        found.setdefault(name, []).append(key)
    return {name: tuple(keys) for name, keys in found.items()}


def lookup_key(name: str, by_name: Mapping[str, Sequence[str]], namespace: str = "") -> str:
    """The key of the model ``name`` means (``namespace``: where to look first, an
    ensemble's repository); TritonError in Triton's words for a name no model has
    (INVALID_ARG; NOT_FOUND for one whose models were all unloaded by name or
    removed: ``by_name`` keeps it, with no key), or one that several models have
    (INVALID_ARG)."""
    keys = by_name.get(name)
    if keys is None:
        raise TritonError.invalid_arg(f"Request for unknown model: '{name}' is not found")
    if namespace:
        own = model_key(namespace, name)
        if own in keys:
            return own
    if len(keys) == 1:
        return keys[0]
    if not keys:
        raise TritonError.not_found(f"Identifier of model '{name}' is not found in global map")
    raise TritonError.invalid_arg(
        f"There are {len(keys)} identifiers of model '{name}' in global map, "
        "model namespace must be provided to resolve ambiguity."
    )


def member_key(namespace: str, member: str, by_name: Mapping[str, Sequence[str]]) -> str:
    """The key of an ensemble's ``member``, for an ensemble of ``namespace``
    (``lookup_key``); when none can be told, the key it would have beside the
    ensemble, which no model has (the ensemble's load says it is missing)."""
    try:
        return lookup_key(member, by_name, namespace)
    except TritonError:
        return model_key(namespace, member)
