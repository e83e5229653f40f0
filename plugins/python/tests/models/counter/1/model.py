# Custom metrics and logging in Triton's documented style.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.requests = pb_utils.MetricFamily(
            name="counter_requests_total_example",
            description="Requests seen by the counter model",
            kind=pb_utils.MetricFamily.COUNTER,
        ).Metric(labels={"model": args["model_name"]})
        self.last = pb_utils.MetricFamily(
            name="counter_last_sum_example", description="Sum of the last X", kind=pb_utils.MetricFamily.GAUGE
        ).Metric(labels={"model": args["model_name"]})
        self.sizes = pb_utils.MetricFamily(
            name="counter_input_size_example",
            description="Elements per request",
            kind=pb_utils.MetricFamily.HISTOGRAM,
        ).Metric(labels={"model": args["model_name"]}, buckets=[1.0, 4.0, 16.0])
        pb_utils.Logger.log_info("counter initialized")

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            self.requests.increment(1)
            self.last.set(float(x.sum()))
            self.sizes.observe(float(x.size))
            pb_utils.Logger.log_warn(f"counter saw {x.size} values")
            total = self.requests.value()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("TOTAL", np.array([total]))]))
        return responses
