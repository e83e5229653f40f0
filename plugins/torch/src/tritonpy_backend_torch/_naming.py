"""How config tensor names reach a model's arguments and results (Triton's conventions).

TorchScript (``pytorch_libtorch``), as Triton's PyTorch backend decides:

- inputs named after ``forward()``'s arguments bind to those arguments;
- otherwise, inputs named ``<name>__<index>`` bind to argument ``index``;
- otherwise the config's order is the argument order (with a warning);
- a ``forward()`` taking one ``Dict[str, Tensor]`` gets every input under its
  config name.

Outputs named ``<name>__<index>`` take element ``index`` of the tuple or list
``forward()`` returns (a single tensor or ``List[str]`` is element 0);
otherwise the config's order is the result order. A dict result (beyond
Triton) is read by key, then by position.

PT2 programs (``torch_aoti``) address their flattened inputs and outputs
either by ordinal, ``INPUT__<i>`` / ``OUTPUT__<i>`` (any ``<name>__<i>``), or
by their place in ``forward()``'s call structure, ``ARGS[0]``,
``ARGS[2][key]``, ``KWARGS[name]``, ``RESULT``, ``RESULT[0]``,
``RESULT[key][1]``, as Triton's PyTorch backend does; tritonpy also takes the
names of ``forward()``'s tensor arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from tritonpy_sdk import TritonError


def named_index(name: str) -> int | None:
    """The index of a ``<name>__<index>`` name (Triton: the text after the first ``__``, all digits)."""
    start = name.find("__")
    if start < 0:
        return None
    tail = name[start + 2 :]
    if not all(c.isdigit() for c in tail):
        return None
    return int(tail) if tail else 0


def input_convention(names: Sequence[str], arguments: Sequence[str]) -> str:
    """How config inputs ``names`` bind to ``forward()``'s ``arguments``, as Triton decides:
    ``"argument"`` (all are argument names), ``"index"`` (all are ``<name>__<index>``) or
    ``"order"`` (the config's order)."""
    if all(n in arguments for n in names):
        return "argument"
    if all(named_index(n) is not None for n in names):
        return "index"
    return "order"


def bind_torchscript_inputs(
    model_name: str,
    names: Sequence[str],
    arguments: Sequence[str],
    log: logging.Logger,
    fixed: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Config input name → position among ``forward()``'s arguments; ``fixed`` are inputs
    bound by their own rule (a sequence model's controls and states), checked with the rest."""
    convention = input_convention(names, arguments)
    if convention == "argument":
        bound = {n: list(arguments).index(n) for n in names}
    elif convention == "index":
        bound = {n: int(named_index(n) or 0) for n in names}
    else:
        first = next(n for n in names if named_index(n) is None)
        log.warning(
            "input '%s' or previous input(s) are neither an input argument to the model '%s' nor do "
            "they follow the <name>__<index> naming convention. Falling back to enforcing strict "
            "ordering from model configuration.",
            first,
            model_name,
        )
        bound = {n: i for i, n in enumerate(names)}
    bound.update(fixed or {})
    for name, index in bound.items():
        if index >= len(arguments):
            raise TritonError.invalid_arg(
                f"unable to load model '{model_name}': input '{name}' refers to argument {index} of "
                f"forward(), which takes {len(arguments)}: {', '.join(arguments)}"
            )
    positions = sorted(bound.values())
    if len(set(positions)) != len(positions):
        raise TritonError.invalid_arg(
            f"unable to load model '{model_name}': two inputs of the configuration refer to the same "
            f"argument of forward() ({', '.join(f'{n} -> {i}' for n, i in bound.items())})"
        )
    return bound


def bind_outputs(model_name: str, names: Sequence[str], log: logging.Logger) -> dict[str, int]:
    """Config output name → index in the model's result (``<name>__<index>`` or config order)."""
    indices = [named_index(n) for n in names]
    if all(i is not None for i in indices):
        return {n: int(i) for n, i in zip(names, indices)}  # type: ignore[arg-type]
    first = next(n for n, i in zip(names, indices) if i is None)
    log.warning(
        "output '%s' or previous output(s) of the model '%s' do not follow the <name>__<index> naming "
        "convention. Falling back to enforcing strict ordering from model configuration.",
        first,
        model_name,
    )
    return {n: i for i, n in enumerate(names)}


def bind_pt2(
    model_name: str,
    kind: str,
    names: Sequence[str],
    leaves: Sequence[str],
    aliases: dict[str, int] | None = None,
) -> dict[str, int]:
    """Config names → flat leaf indices of a PT2 program's inputs or outputs.

    ``leaves`` are the call-structure names (``ARGS[0]`` ...) in flat order;
    ``aliases`` further names (``forward()``'s argument names) for some leaves.
    """
    by_path = {p: i for i, p in enumerate(leaves)}
    bound: dict[str, int] = {}
    for name in names:
        if name in by_path:
            bound[name] = by_path[name]
        elif aliases and name in aliases:
            bound[name] = aliases[name]
        else:
            index = named_index(name)
            if index is None or index >= len(leaves):
                allowed = [*leaves, *(aliases or {})]
                raise TritonError.invalid_arg(
                    f"unable to load model '{model_name}': unexpected inference {kind} '{name}', "
                    f"allowed {kind}s are: {', '.join(allowed)} (or <name>__<index> for index "
                    f"0..{len(leaves) - 1})"
                )
            bound[name] = index
    return bound
