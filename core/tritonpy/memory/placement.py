"""Where an instance gets its inputs: on the device, or in host memory.

A device-resident input (a fixed-size input in a client's CUDA shared-memory
region, or a device output of an earlier ensemble step) stays where it is for an
instance that declared ``device_inputs`` and runs on that GPU; every other
instance gets it copied to host memory, once, before its ``execute`` — so a
backend that never heard of device tensors sees host memory, as it always did.
Only where the host has a GPU: elsewhere no device-resident input can exist
(a ``DeviceArray`` of host memory that a backend made reads as host data anyway).

``input_device`` says on which GPU a model takes device inputs, if any: an
ensemble asks an earlier step for its output there (``RequestedOutput.device_id``),
so that it never leaves the device between the two steps.
"""

from __future__ import annotations

from collections.abc import Sequence

from tritonpy_sdk import KDLCUDA, InferenceRequest, ModelInstance


def place_inputs(instance: ModelInstance, requests: Sequence[InferenceRequest]) -> None:
    """Copy to host memory each input of ``requests`` that ``instance`` does not
    take where it lies (the requests' input maps are updated in place)."""
    gpu = instance.device_id if instance.device_inputs and instance.kind == "KIND_GPU" else -1
    for request in requests:
        inputs = request.inputs
        for name, tensor in inputs.items():
            device = tensor.device
            if device is not None and (device.device_type != KDLCUDA or device.device_id != gpu):
                inputs[name] = tensor.to_host()  # same keys: safe while iterating


def input_device(instances: Sequence[ModelInstance]) -> int | None:
    """The GPU on which every one of a model's ``instances`` takes device inputs in
    place; None when one takes host memory, they are spread over several GPUs (the
    scheduler picks the instance later), or there are none (an ensemble)."""
    gpu: int | None = None
    for instance in instances:
        if not instance.device_inputs or instance.kind != "KIND_GPU":
            return None
        if gpu is None:
            gpu = instance.device_id
        elif gpu != instance.device_id:
            return None
    return gpu
