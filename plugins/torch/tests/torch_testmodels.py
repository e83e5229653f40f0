"""Small models for the torch backend's tests, scripted (or exported) into model folders."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn


class MLP(nn.Module):
    def __init__(self, features: int = 16, hidden: int = 32, classes: int = 4) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class AddSub(nn.Module):
    def forward(self, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        return a + b, a - b


class Scale(nn.Module):
    """Inputs bound by forward()'s argument names."""

    def forward(self, image: Tensor, scale: Tensor) -> Tensor:
        return image * scale


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(100, 8)

    def forward(self, ids: Tensor) -> Tensor:
        return self.table(ids)


class Words(nn.Module):
    """List[str] in, (List[str], lengths) out."""

    def forward(self, words: list[str]) -> tuple[list[str], Tensor]:
        upper = [w.upper() for w in words]
        lengths = torch.tensor([len(w) for w in words], dtype=torch.int64)
        return upper, lengths


class Raises(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        if bool(x.sum() > 0):
            raise RuntimeError("only non-positive inputs, please")
        return -x


class DictIn(nn.Module):
    def forward(self, inputs: dict[str, Tensor]) -> Tensor:
        return inputs["a"] * inputs["b"]


class DictOut(nn.Module):
    def forward(self, x: Tensor) -> dict[str, Tensor]:
        return {"double": x * 2, "square": x * x}


class Busy(nn.Module):
    """Keeps a core busy for a while (matmuls in a loop): for tests of concurrent instances."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.eye(128) * 0.5, requires_grad=False)

    def forward(self, x: Tensor, rounds: Tensor) -> Tensor:
        y = x
        for _ in range(int(rounds.reshape(-1)[0])):
            y = torch.tanh(y @ self.w)
        return y


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, stride=2)
        self.head = nn.Linear(16, 10)

    def forward(self, x: Tensor) -> Tensor:
        y = torch.relu(self.conv1(x))
        y = torch.relu(self.conv2(y))
        return self.head(y.mean(dim=(2, 3)))


def save_script(
    module: nn.Module, folder: Path, config: str = "", version: int = 1
) -> torch.jit.ScriptModule:
    """``folder/<version>/model.pt`` (and ``config.pbtxt`` when given); returns the scripted module."""
    torch.manual_seed(0)
    scripted = torch.jit.script(module.eval())
    (folder / str(version)).mkdir(parents=True, exist_ok=True)
    scripted.save(str(folder / str(version) / "model.pt"))
    if config:
        (folder / "config.pbtxt").write_text(config)
    return scripted


def io(name: str, data_type: str, dims: list[int], extra: str = "") -> str:
    return f'{{ name: "{name}" data_type: {data_type} dims: {dims} {extra}}}'


def config(
    inputs: list[str],
    outputs: list[str],
    max_batch: int = 0,
    extra: str = "",
    platform: str = "pytorch_libtorch",
) -> str:
    return (
        f'platform: "{platform}"\nmax_batch_size: {max_batch}\n'
        f"input [ {', '.join(inputs)} ]\noutput [ {', '.join(outputs)} ]\n{extra}\n"
    )


class RaggedSums(nn.Module):
    """A ragged input with Triton's BATCH_ELEMENT_COUNT batch input: one sum per request."""

    def forward(self, x: Tensor, counts: Tensor) -> Tensor:
        sizes: list[int] = counts.to(torch.int64).reshape(-1).tolist()
        return torch.stack([c.sum() for c in torch.split(x.reshape(-1), sizes)]).reshape(-1, 1)


#: The output of ``DoubleAndHalve`` that device-output tests ask for on the GPU.
OUT = "OUTPUT__0"


class DoubleAndHalve(nn.Module):
    """Two outputs, exact in float32: rows mixed up between requests would show."""

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return x * 2.0, x * 0.5


def double_and_halve(folder: Path, kind: str = "", max_batch: int = 8, extra: str = "") -> Path:
    """``DoubleAndHalve`` scripted into ``folder``: INPUT__0 FP32 [4] in, OUTPUT__0 (x2) and
    OUTPUT__1 (x0.5) out; one instance of ``kind`` when given; ``extra`` config text."""
    group = f"instance_group [ {{ kind: {kind} count: 1 }} ]\n" if kind else ""
    save_script(
        DoubleAndHalve(),
        folder,
        config(
            [io("INPUT__0", "TYPE_FP32", [4])],
            [io(OUT, "TYPE_FP32", [4]), io("OUTPUT__1", "TYPE_FP32", [4])],
            max_batch,
            group + extra,
        ),
    )
    return folder


class Accumulator(nn.Module):
    """A sequence model with Triton's implicit state: INPUT__0 is added to the state (STATE_IN__4 in,
    STATE_OUT__2 out, also OUTPUT__0); FLAGS__1 shows the controls the core fed (START__1 + 10 ×
    END__2 + 100 × READY__3), each control of another data type."""

    def forward(
        self, x: Tensor, start: Tensor, end: Tensor, ready: Tensor, state: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        total = torch.where(ready != 0, state + x, state)
        flags = start.to(torch.float32) + 10 * end.to(torch.float32) + 100 * ready.to(torch.float32)
        return total, flags, total


def accumulator_config(max_batch: int = 2, extra: str = "") -> str:
    """``Accumulator``'s config: direct strategy, a control of each boolean data type."""
    return config(
        [io("INPUT__0", "TYPE_FP32", [1])],
        [io("OUTPUT__0", "TYPE_FP32", [1]), io("FLAGS__1", "TYPE_FP32", [1])],
        max_batch,
        "sequence_batching {\n"
        "  max_sequence_idle_microseconds: 60000000\n"
        "  direct { }\n"
        '  control_input [ { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START '
        "int32_false_true: [ 0, 1 ] } ] },\n"
        '    { name: "END__2" control [ { kind: CONTROL_SEQUENCE_END '
        "bool_false_true: [ false, true ] } ] },\n"
        '    { name: "READY__3" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] } ] } ]\n'
        '  state [ { input_name: "STATE_IN__4" output_name: "STATE_OUT__2" data_type: TYPE_FP32 '
        "dims: [ 1 ] } ]\n"
        "}\n" + extra,
    )


class Tagged(nn.Module):
    """A sequence model with a CORRID control and no state; its config input is named after the
    argument (the control binds by its own ``__1`` all the same)."""

    def forward(self, value: Tensor, corrid: Tensor) -> Tensor:
        return value + corrid.to(value.dtype) * 1000
