"""What the broker counts for its metrics, kept as plain numbers on the paths that change them.

The request, produce and fetch paths add to these per request or per partition of a request
(never per record); ``server/prometheus.py`` turns them, and gauges read from the broker's state
at scrape time, into Kafka's metric names as Prometheus sees them. Nothing here imports
Prometheus: the counting costs an attribute add, the exposition happens only when scraped.

Kafka's timers are Yammer histograms (a count, a sum and a sample reservoir giving the 50th to
99.9th percentiles); ``Histogram`` keeps the count, the sum and the last ``RESERVOIR`` samples.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Iterable

RESERVOIR = 1028  # Yammer's default reservoir size, which Kafka's histograms use
# the stages of a request Kafka times (RequestMetrics' ...TimeMs): all of it, queued behind the
# connection's earlier requests, handled here (local), waiting on others (remote: followers for
# acks=all, new records for a long-poll), writing the response (send)
STAGES = ("TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs",
          "ResponseSendTimeMs")
# Kafka's histogram percentiles, as the Prometheus JMX exporter's rules label them
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98),
             ("0.99", 0.99), ("0.999", 0.999))


class Histogram:
    """Count, sum and the most recent samples (milliseconds for Kafka's ``...TimeMs``)."""

    __slots__ = ("count", "total", "_samples", "_next")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self._samples: list[float] = []
        self._next = 0

    def record(self, value: float) -> None:
        self.count += 1
        self.total += value
        samples = self._samples
        if len(samples) < RESERVOIR:
            samples.append(value)
        else:
            samples[self._next] = value
            self._next = (self._next + 1) % RESERVOIR

    def quantiles(self) -> list[tuple[str, float]]:
        """Kafka's percentiles of the samples kept (0.0 each before any sample)."""
        ordered = sorted(self._samples)
        if not ordered:
            return [(label, 0.0) for label, _ in QUANTILES]
        last = len(ordered) - 1
        return [(label, ordered[min(last, int(q * len(ordered)))]) for label, q in QUANTILES]


class ThreadedHistogram(Histogram):
    """A histogram recorded from worker threads too (log flushes, the controller's thread)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def record(self, value: float) -> None:
        with self._lock:
            super().record(value)


class TopicStats:
    """Kafka's BrokerTopicMetrics for one topic (or, in ``BrokerTopicStats.all``, all)."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "bytes_rejected",
                 "total_produce_requests", "total_fetch_requests",
                 "failed_produce_requests", "failed_fetch_requests")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.bytes_rejected = 0
        self.total_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_produce_requests = 0
        self.failed_fetch_requests = 0


class BrokerTopicStats:
    """Per topic and in total, as Kafka's BrokerTopicStats (``all`` has no topic label)."""

    def __init__(self) -> None:
        self.all = TopicStats()
        self.topics: dict[str, TopicStats] = {}
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def produced(self, topic: str, nbytes: int, messages: int) -> None:
        stats = self.topics.get(topic) or self.topic(topic)
        stats.messages_in += messages
        stats.bytes_in += nbytes
        stats.total_produce_requests += 1
        everything = self.all
        everything.messages_in += messages
        everything.bytes_in += nbytes
        everything.total_produce_requests += 1

    def produce_failed(self, topic: str, nbytes: int, rejected: bool) -> None:
        """A partition's produce that was refused (``rejected``: its records were invalid or
        too large, Kafka's BytesRejectedPerSec)."""
        stats = self.topic(topic)
        stats.total_produce_requests += 1
        stats.failed_produce_requests += 1
        everything = self.all
        everything.total_produce_requests += 1
        everything.failed_produce_requests += 1
        if rejected:
            stats.bytes_rejected += nbytes
            everything.bytes_rejected += nbytes

    def fetched(self, topic: str, nbytes: int, failed: bool) -> None:
        """A consumer's fetch of one partition of ``topic`` (followers' fetches count as
        replication bytes instead, as in Kafka)."""
        stats = self.topic(topic)
        stats.total_fetch_requests += 1
        stats.bytes_out += nbytes
        everything = self.all
        everything.total_fetch_requests += 1
        everything.bytes_out += nbytes
        if failed:
            stats.failed_fetch_requests += 1
            everything.failed_fetch_requests += 1

    def remove(self, topic: str) -> None:
        self.topics.pop(topic, None)


class RequestStats:
    """Kafka's RequestMetrics for one request name and version: how many, and the time spent
    in each stage of their lives (``STAGES``), kept as one reservoir of samples over the same
    requests. Recorded with one call per request; the samples are plain doubles in an array
    (no object per request for the garbage collector to follow)."""

    __slots__ = ("count", "sums", "_samples")

    def __init__(self) -> None:
        self.count = 0
        self.sums = [0.0] * len(STAGES)
        self._samples = array("d", bytes(8 * len(STAGES) * RESERVOIR))

    def record(self, received: float, started: float, handled: float, remote_s: float,
               sent: float) -> None:
        """One request's ``time.monotonic()`` times: it arrived, its handling started, its
        response was ready (``remote_s`` of that spent waiting on others), it was written."""
        total = (sent - received) * 1000.0
        queue = (started - received) * 1000.0
        remote = remote_s * 1000.0
        local = (handled - started) * 1000.0 - remote
        send = (sent - handled) * 1000.0
        i = (self.count % RESERVOIR) * 5
        samples = self._samples
        samples[i] = total
        samples[i + 1] = queue
        samples[i + 2] = local
        samples[i + 3] = remote
        samples[i + 4] = send
        self.count += 1
        sums = self.sums
        sums[0] += total
        sums[1] += queue
        sums[2] += local
        sums[3] += remote
        sums[4] += send

    def stage_samples(self, index: int) -> list[float]:
        """The kept samples of one stage (``STAGES[index]``)."""
        kept = min(self.count, RESERVOIR)
        return list(self._samples[index : kept * 5 : 5])


def stage_histogram(versions: Iterable[RequestStats], index: int) -> Histogram:
    """The histogram of one stage (``STAGES[index]``) over a request's versions."""
    histogram = Histogram()
    for stats in versions:
        histogram.count += stats.count
        histogram.total += stats.sums[index]
        histogram._samples += stats.stage_samples(index)
    return histogram


class BrokerMetrics:
    """Everything the broker counts, one per broker (tests run several in one process)."""

    def __init__(self) -> None:
        self.topics = BrokerTopicStats()
        self.requests: dict[tuple[str, int], RequestStats] = {}  # by request name and version
        self.log_flush = ThreadedHistogram()
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.leader_elections = Histogram()
        self.unclean_leader_elections = 0
        # requests waiting in Kafka's purgatories: acks=all produces, long-polling fetches
        self.delayed_produce = 0
        self.delayed_fetch = 0

    def request(self, name: str, version: int) -> RequestStats:
        stats = self.requests.get((name, version))
        if stats is None:
            stats = self.requests[(name, version)] = RequestStats()
        return stats
