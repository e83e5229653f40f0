# Custom metrics and logging in Triton's documented style.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # The families are kept: a metric whose family is gone can no longer be used.
        self.families = [
            pb_utils.MetricFamily(
                name="counter_requests_total_example",
                description="Requests seen by the counter model",
                kind=pb_utils.MetricFamily.COUNTER,
            ),
            pb_utils.MetricFamily(
                name="counter_last_sum_example",
                description="Sum of the last X",
                kind=pb_utils.MetricFamily.GAUGE,
            ),
            pb_utils.MetricFamily(
                name="counter_input_size_example",
                description="Elements per request",
                kind=pb_utils.MetricFamily.HISTOGRAM,
            ),
        ]
        labels = {"model": args["model_name"]}
        self.requests = self.families[0].Metric(labels=labels)
        self.last = self.families[1].Metric(labels=labels)
        self.sizes = self.families[2].Metric(labels=labels, buckets=[1.0, 4.0, 16.0])
        pb_utils.Logger.log_info("counter initialized")
        # As in Triton: a metric of a family already dropped, and histogram buckets
        # that are not strictly increasing, are errors (logged for the test to read).
        dropped = pb_utils.MetricFamily(
            name="counter_dropped_example", description="dropped at once", kind=pb_utils.MetricFamily.GAUGE
        ).Metric(labels=labels)
        for attempt in (
            lambda: dropped.set(1.0),
            lambda: self.families[2].Metric(labels={}, buckets=[1, 1, 2]),
        ):
            try:
                attempt()
            except pb_utils.TritonModelException as exc:
                pb_utils.Logger.log_info(f"refused: {exc}")

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
