"""Query the example repository with the unmodified Triton client.

pip install "tritonclient[http]"                               # Triton's client, once (./dev serve has)
tritonpy serve --model-repository examples/model_repository   # in one shell (or ./dev serve)
python examples/client_example.py [URL]                        # in another (URL: localhost:8000)
"""

from __future__ import annotations

import argparse

import numpy as np
import tritonclient.http as httpclient


def main(url: str = "localhost:8000") -> None:
    client = httpclient.InferenceServerClient(url)
    print("server ready:", client.is_server_ready())

    # simple: binary tensor data in and out
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.ones((1, 16), dtype=np.int32)
    inputs = [
        httpclient.InferInput("INPUT0", [1, 16], "INT32"),
        httpclient.InferInput("INPUT1", [1, 16], "INT32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("simple", inputs)
    print("simple OUTPUT0:", result.as_numpy("OUTPUT0"))
    print("simple OUTPUT1:", result.as_numpy("OUTPUT1"))

    # iris_classifier: top-2 classes with labels (classification extension)
    features = httpclient.InferInput("FEATURES", [1, 4], "FP32")
    features.set_data_from_numpy(np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32), binary_data=False)
    top2 = httpclient.InferRequestedOutput("PROBABILITIES", class_count=2)
    result = client.infer("iris_classifier", [features], outputs=[top2])
    print("iris top-2:", result.as_numpy("PROBABILITIES"))

    # iris_species: a Python model (model.py) that calls iris_classifier through BLS
    measurements = httpclient.InferInput("MEASUREMENTS_MM", [2, 4], "FP32")
    measurements.set_data_from_numpy(np.array([[51, 35, 14, 2], [67, 30, 52, 23]], dtype=np.float32))
    result = client.infer("iris_species", [measurements])
    print("species:", result.as_numpy("SPECIES").reshape(-1), result.as_numpy("PROBABILITY").reshape(-1))

    # string_identity: BYTES tensors (config.pbtxt auto-completed from the graph)
    text = httpclient.InferInput("TEXT_IN", [1, 2], "BYTES")
    text.set_data_from_numpy(np.array([[b"hello", b"tritonpy"]], dtype=object))
    result = client.infer("string_identity", [text])
    print("strings:", result.as_numpy("TEXT_OUT"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", default="localhost:8000", help="HTTP address of the server")
    main(parser.parse_args().url)
