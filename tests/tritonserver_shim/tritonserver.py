"""``import tritonserver`` resolved to tritonpy, for NVIDIA's own tests of Triton's
in-process Python API run unchanged against it
(``tests/integration/test_nvidia_examples_tritonserver_api.py``): every public name
of tritonpy's in-process API, under the module name those tests import."""

from tritonpy import *  # noqa: F403
