"""The server's Prometheus metrics, in a registry of its own (`Metrics.text`: what ``GET /metrics`` answers).

* ``searchless_serve_requests_total{endpoint, status}``: requests answered (499: the client left first);
* ``searchless_serve_request_seconds{endpoint}``: a histogram of the time to answer;
* ``searchless_serve_queue_wait_seconds``: a histogram of each position's wait for its model call;
* ``searchless_serve_batch_size``: a histogram of positions per model call;
* ``searchless_serve_model_seconds``: a histogram of the model calls' time;
* ``searchless_serve_queue_length``: positions waiting now;
* ``searchless_serve_requests_in_flight``: requests read and not yet answered (`in_flight`);
* ``searchless_serve_ready``: 1 once every batch shape is compiled;
* ``searchless_serve_compiled_shapes``, ``searchless_serve_compiled_after_ready_total``: the batch shapes compiled,
  and those compiled after ready (none, when the warm-up compiled everything a call can use);
* ``searchless_serve_gc_frozen_objects``: what the process held once ready (the model, JAX), out of the garbage
  collector's generations (`gc.freeze`): no full collection walks it.

>>> metrics = Metrics()
>>> metrics.batch_size.observe(3)
>>> [line for line in metrics.text().decode().splitlines() if line.startswith('searchless_serve_batch_size_count')]
['searchless_serve_batch_size_count 1.0']
"""

from collections.abc import Callable

import prometheus_client

CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
  """The metrics of one server (a registry of its own: two servers in one process do not mix)."""

  def __init__(self) -> None:
    self.registry = prometheus_client.CollectorRegistry(auto_describe=True)
    registry = self.registry
    self.requests = prometheus_client.Counter(
      'searchless_serve_requests', 'Requests answered, by endpoint and status.', ['endpoint', 'status'],
      registry=registry,
    )  # fmt: skip
    self.latency = prometheus_client.Histogram(
      'searchless_serve_request_seconds', 'Time to answer a request, by endpoint.', ['endpoint'],
      buckets=SECONDS_BUCKETS, registry=registry,
    )  # fmt: skip
    self.queue_wait = prometheus_client.Histogram(
      'searchless_serve_queue_wait_seconds', "Each position's wait in the queue for its model call.",
      buckets=SECONDS_BUCKETS, registry=registry,
    )  # fmt: skip
    self.batch_size = prometheus_client.Histogram(
      'searchless_serve_batch_size', 'Positions per model call.', buckets=SIZE_BUCKETS, registry=registry
    )
    self.model_seconds = prometheus_client.Histogram(
      'searchless_serve_model_seconds', 'Time of one model call.', buckets=SECONDS_BUCKETS, registry=registry
    )
    self.queue_length = prometheus_client.Gauge(
      'searchless_serve_queue_length', 'Positions waiting for a model call.', registry=registry
    )
    self.in_flight = 0  # Requests read and not yet answered (`started`, `answered`): a gauge, read by nothing else.
    prometheus_client.Gauge(
      'searchless_serve_requests_in_flight', 'Requests read and not yet answered.', registry=registry
    ).set_function(lambda: self.in_flight)
    self.ready = prometheus_client.Gauge(
      'searchless_serve_ready', '1 once the model is loaded and every batch shape compiled.', registry=registry
    )
    self.compiled_shapes = prometheus_client.Gauge(
      'searchless_serve_compiled_shapes', 'Batch shapes compiled.', registry=registry
    )
    self.compiled_after_ready = prometheus_client.Counter(
      'searchless_serve_compiled_after_ready', 'Batch shapes compiled after ready (none expected).', registry=registry
    )
    self.frozen = prometheus_client.Gauge(
      'searchless_serve_gc_frozen_objects',
      "Objects moved out of the garbage collector's generations once ready (gc.freeze).",
      registry=registry,
    )

  def started(self) -> None:
    """A request has been read (`in_flight` + 1)."""
    self.in_flight += 1

  def answered(self, endpoint: str, status: int, seconds: float) -> None:
    """A request has been answered: counted and timed by endpoint (`in_flight` - 1)."""
    self.in_flight -= 1
    self.requests.labels(endpoint, str(status)).inc()
    self.latency.labels(endpoint).observe(seconds)

  def watch_queue(self, length: Callable[[], int]) -> None:
    """Reads the queue length from `length` at each scrape."""
    self.queue_length.set_function(length)

  def observe_batch(self, size: int, waits: list[float], seconds: float) -> None:
    """Records one model call: its positions, each one's wait in the queue, its time."""
    self.batch_size.observe(size)
    self.model_seconds.observe(seconds)
    for wait in waits:
      self.queue_wait.observe(wait)

  def text(self) -> bytes:
    """The metrics in Prometheus' text format."""
    return prometheus_client.generate_latest(self.registry)
