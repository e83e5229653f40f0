"""Profile choice, request shape checks, CUDA graph specs, where outputs go and availability messages,
on plain data."""

from __future__ import annotations

from typing import Any

import pytest
from tritonpy.config import config_to_dict, parse_config_text
from tritonpy_backend_tensorrt._availability import deserialize_message, unavailable_reason
from tritonpy_backend_tensorrt._graphs import GraphKey, GraphSpec, find_graph, graph_shapes, graph_specs
from tritonpy_backend_tensorrt._instance import stays_on_device
from tritonpy_backend_tensorrt._profiles import choose_profile, profile_names
from tritonpy_sdk import DataType, InferenceRequest, RequestedOutput, TritonError
from trt_engines import two_profile_engine

ENGINE = two_profile_engine()
BOTH = [("0", ENGINE.profiles[0]), ("1", ENGINE.profiles[1])]


def config(text: str) -> dict[str, Any]:
    return config_to_dict(parse_config_text('name: "m"\n' + text, "config.pbtxt"))


def test_the_profile_holding_the_shapes_is_chosen() -> None:
    assert choose_profile("m_0", BOTH, {"X": (2, 4)})[0] == "0"
    assert choose_profile("m_0", BOTH, {"X": (12, 4)})[0] == "1"


def test_the_nearest_opt_wins_where_ranges_overlap() -> None:
    overlapping = [("a", ENGINE.profiles[0]), ("b", ENGINE.profiles[0])]
    assert choose_profile("m_0", overlapping, {"X": (4, 8)})[0] == "a"


def test_shapes_no_profile_holds_fail_with_tritons_message() -> None:
    with pytest.raises(TritonError) as err:
        choose_profile("m_0", BOTH, {"X": (20, 4)})
    assert str(err.value) == (
        "request specifies invalid shape for input 'X' for m_0. Error details: model expected the "
        "shape of dimension 0 to be between 1 and 4 but received 20"
    )
    with pytest.raises(TritonError, match="dimension 1 to be between 1 and 8 but received 9"):
        choose_profile("m_0", BOTH[:1], {"X": (2, 9)})
    assert profile_names(BOTH) == "[ 0[0] 1[1]]"


def test_graphs_are_off_unless_asked() -> None:
    assert graph_specs(config("max_batch_size: 8")) == []


def test_default_graph_batch_sizes_are_tritons() -> None:
    plain = config("max_batch_size: 8 optimization { cuda { graphs: true } }")
    assert [s.batch_size for s in graph_specs(plain)] == [1, 2, 3, 4, 6, 8]
    batched = config(
        "max_batch_size: 32 dynamic_batching { preferred_batch_size: [ 4, 8 ] }"
        " optimization { cuda { graphs: true } }"
    )
    assert [s.batch_size for s in graph_specs(batched)] == [1, 4, 8, 32]
    assert [s.batch_size for s in graph_specs(config("optimization { cuda { graphs: true } }"))] == [0]


def test_graph_specs_from_the_config_are_checked() -> None:
    cfg = config(
        "max_batch_size: 8 optimization { cuda { graphs: true graph_spec [ { batch_size: 4"
        ' input { key: "X" value { dim: [ 6 ] } } graph_lower_bound { batch_size: 2 } } ] } }'
    )
    assert graph_specs(cfg) == [GraphSpec(4, 2, {"X": (6,)})]
    with pytest.raises(TritonError, match="graph spec expects 'batch_size' to be >= 1 and <= 8"):
        graph_specs(
            config(
                "max_batch_size: 8 optimization { cuda { graphs: true graph_spec [ { batch_size: 9 } ] } }"
            )
        )
    with pytest.raises(TritonError, match="to be 0 if 'max_batch_size' is 0"):
        graph_specs(config("optimization { cuda { graphs: true graph_spec [ { batch_size: 1 } ] } }"))


def test_graph_shapes_fill_variable_dims_from_the_spec_or_the_profiles_opt() -> None:
    cfg = config('max_batch_size: 8 input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]')
    assert graph_shapes(GraphSpec(4, 4, {"X": (6,)}), cfg, {"X": (2, 4)}) == {"X": (4, 6)}
    assert graph_shapes(GraphSpec(2, 2), cfg, {"X": (2, 4)}) == {"X": (2, 4)}


def test_a_batch_runs_the_exact_graph_or_a_padded_one_above_its_lower_bound() -> None:
    key = GraphKey(0, ((4,),))
    graphs = [(key, 1, 1, "g1"), (key, 2, 4, "g4")]
    assert find_graph(graphs, key, 1) == ("g1", 1)
    assert find_graph(graphs, key, 4) == ("g4", 4)
    assert find_graph(graphs, key, 3) == ("g4", 4)
    assert find_graph(graphs, key, 5) is None
    assert find_graph(graphs, GraphKey(0, ((5,),)), 4) is None


def test_availability_names_the_extra_to_install() -> None:
    missing = unavailable_reason(None, "No module named 'tensorrt'", False, 0)
    assert "needs the 'tensorrt' package (No module named 'tensorrt')" in missing
    assert "pip install 'tritonpy-backend-tensorrt[cu12]'" in missing and "[cu13]" in missing
    assert "TensorRT >= 10, this is TensorRT 8.6.1" in unavailable_reason("8.6.1", "", True, 1)
    assert "cuda-python" in unavailable_reason("10.13.0", "", False, 1)
    assert "no CUDA GPU here" in unavailable_reason("10.13.0", "", True, 0)
    assert unavailable_reason("10.13.0", "", True, 1) == ""


def test_a_refused_plan_says_why() -> None:
    message = deserialize_message(
        "m",
        "model.plan",
        0,
        ("NVIDIA H100", "9.0"),
        "10.13.0",
        [
            "The engine plan file is not compatible with this version of TensorRT, expecting library "
            "version 10.13.0 got 10.3.0, please rebuild."
        ],
    )
    assert message.startswith(
        "unable to load model 'm': TensorRT 10.13.0 cannot deserialize model.plan on GPU 0 "
        "(NVIDIA H100, compute capability 9.0): The engine plan file is not compatible"
    )
    assert "build it again on this host" in message


def _wanting(*devices: int | None) -> list[InferenceRequest]:
    """One request per entry, each naming output Y wanted on that GPU (None: the host)."""
    return [InferenceRequest("m", 1, {}, [RequestedOutput("Y", device_id=d)]) for d in devices]


def test_outputs_stay_on_the_gpu_where_their_consumers_want_them() -> None:
    fp32 = DataType.FP32
    assert stays_on_device(_wanting(0, 0), "Y", 0, fp32) == (True, False)  # never copied to the host
    assert stays_on_device(_wanting(0, None), "Y", 0, fp32) == (True, True)  # a mixed batch: both
    assert stays_on_device(_wanting(None), "Y", 0, fp32) == (False, True)
    assert stays_on_device(_wanting(1), "Y", 0, fp32) == (False, True)  # another GPU's consumer: via the host
    assert stays_on_device(_wanting(0), "Z", 0, fp32) == (False, True)  # Z not named: the host, as always
    assert stays_on_device(_wanting(0), "Y", 0, DataType.BF16) == (False, True)
