"""Prometheus text exposition with Triton's exact metric names.

Why not prometheus-client (not a dependency): its writer renames every counter
to ``<name>_total``, and Triton's counters carry no suffix; existing dashboards
query them by those names. So tritonpy writes the text format itself from plain
families (a page of code, no registry to share between servers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Labels = Mapping[str, str]


@dataclass
class Family:
    """One metric family: HELP, TYPE and its samples (name, labels, value)."""

    name: str
    help: str
    type: str  # counter, gauge, summary, histogram
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)

    def add(self, labels: Labels, value: float, suffix: str = "") -> None:
        self.samples.append((self.name + suffix, labels, value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _label_order(name: str) -> tuple[bool, str]:
    """Labels as Triton (prometheus-cpp) writes them: by name, a histogram's ``le`` and a
    summary's ``quantile`` last."""
    return name in ("le", "quantile"), name


def render(families: Iterable[Family]) -> str:
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape(family.help)}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for name, labels, value in family.samples:
            if labels:
                text = ",".join(f'{k}="{_escape(str(labels[k]))}"' for k in sorted(labels, key=_label_order))
                lines.append(f"{name}{{{text}}} {_number(value)}")
            else:
                lines.append(f"{name} {_number(value)}")
    return "\n".join(lines) + "\n"
