"""The data flow of an ensemble's steps, checked from its config alone.

Triton checks this when it reads the config, before any member is looked at:
each step names a model and maps inputs and outputs; every ensemble tensor is
written by at most one step; every ensemble input is read; every ensemble
output is written by a chain of steps that starts at the ensemble's inputs (so
a cycle leaves its outputs unwritten); and every other tensor is both written
and read. Messages are Triton 2.51's, typos included (its "for ensemble X'").
The checks against the members' own configs (names, data types, shapes, batch
sizes) need the members loaded: ``tritonpy.runtime.ensemble_plan`` does them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .model_config_pb2 import ModelConfig


@dataclass(eq=False)
class _Node:
    """One ensemble tensor: the tensors its writing step reads, the tensors written from it."""

    written: bool = False
    before: list[_Node] = field(default_factory=list)
    after: list[_Node] = field(default_factory=list)
    ready: bool = False


def ensemble_graph_problem(config: ModelConfig) -> str | None:
    """The first problem of ``config``'s step graph, in Triton's words, or None."""
    name = config.name
    nodes: dict[str, _Node] = {}
    for index, step in enumerate(config.ensemble_scheduling.step):
        where = f"in step {index} of ensemble '{name}'"
        if not step.model_name:
            return f"must specify 'model_name' {where}"
        if len(step.input_map) == 0:
            return f"must specify 'input_map' {where}"
        if len(step.output_map) == 0:
            return f"must specify 'output_map' {where}"
        written: list[_Node] = []
        for tensor in step.output_map.values():
            node = nodes.get(tensor)
            if node is None:
                node = nodes[tensor] = _Node()
            elif node.written:
                return (
                    f"ensemble tensor '{tensor}' can appear in an output map only once for "
                    f"ensemble '{name}' step {index}"
                )
            node.written = True
            written.append(node)
        for tensor in step.input_map.values():
            source = nodes.setdefault(tensor, _Node())
            for node in written:
                node.before.append(source)
                source.after.append(node)
    ready: list[_Node] = []
    for io in config.input:
        node = nodes.get(io.name)
        if node is None:
            return f"ensemble input '{io.name}' for ensemble {name}' is not used"
        node.ready = True
        ready.append(node)
    _propagate(ready)
    outputs: set[str] = set()
    for io in config.output:
        node = nodes.get(io.name)
        if node is None:
            return f"ensemble output '{io.name}' for ensemble {name}' is not used"
        if not node.ready:
            cut = _first_unconnected(node, nodes)
            return (
                f"output '{io.name}' for ensemble '{name}' is not written: at least one of its "
                f"depending tensors, '{cut}', is not connected"
            )
        outputs.add(io.name)
    for tensor, node in nodes.items():
        if tensor not in outputs and (not node.ready or not node.after):
            return f"ensemble tensor '{tensor}' is unused in ensemble '{name}'"
    return None


def _propagate(ready: list[_Node]) -> None:
    """Mark every tensor whose writing step can run once ``ready`` exist."""
    while ready:
        node = ready.pop()
        for nxt in node.after:
            if not nxt.ready and all(b.ready for b in nxt.before):
                nxt.ready = True
                ready.append(nxt)


def _first_unconnected(output: _Node, nodes: dict[str, _Node]) -> str:
    """The tensor where a walk back from ``output`` through tensors that never
    become ready ends: one nothing writes, or where the walk meets itself (a cycle)."""
    names = {id(node): tensor for tensor, node in nodes.items()}
    seen = {id(output)}
    node = output
    while True:
        nxt = next((b for b in node.before if not b.ready and id(b) not in seen), None)
        if nxt is None:
            return names[id(node)]
        seen.add(id(nxt))
        node = nxt
