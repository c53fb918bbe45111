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

RESERVOIR = 1028  # Yammer's default reservoir size, which Kafka's histograms use
# Kafka's histogram percentiles, as the Prometheus JMX exporter's rules label them
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98),
             ("0.99", 0.99), ("0.999", 0.999))


class Histogram:
    """Count, sum and the most recent samples (milliseconds for Kafka's ``...TimeMs``)."""

    __slots__ = ("count", "total", "_samples", "_next", "_lock")

    def __init__(self, threaded: bool = False) -> None:
        self.count = 0
        self.total = 0.0
        self._samples: list[float] = []
        self._next = 0
        # timers recorded from worker threads (log flushes) take a lock; request timers do not
        self._lock = threading.Lock() if threaded else None

    def record(self, value: float) -> None:
        if self._lock is not None:
            with self._lock:
                self._record(value)
        else:
            self._record(value)

    def _record(self, value: float) -> None:
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
        stats = self.topic(topic)
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
    """Kafka's RequestMetrics for one request name: requests per version and the time spent in
    each stage of the request's life."""

    __slots__ = ("by_version", "total", "queue", "local", "remote", "send", "throttle")

    def __init__(self) -> None:
        self.by_version: dict[int, int] = {}
        self.total = Histogram()
        self.queue = Histogram()
        self.local = Histogram()
        self.remote = Histogram()
        self.send = Histogram()
        self.throttle = Histogram()


class BrokerMetrics:
    """Everything the broker counts, one per broker (tests run several in one process)."""

    def __init__(self) -> None:
        self.topics = BrokerTopicStats()
        self.requests: dict[str, RequestStats] = {}
        self.log_flush = Histogram(threaded=True)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.leader_elections = Histogram()
        self.unclean_leader_elections = 0
        # requests waiting in Kafka's purgatories: acks=all produces, long-polling fetches
        self.delayed_produce = 0
        self.delayed_fetch = 0

    def request(self, name: str) -> RequestStats:
        stats = self.requests.get(name)
        if stats is None:
            stats = self.requests[name] = RequestStats()
        return stats


class RequestTiming:
    """One request's times (``time.monotonic()`` seconds), left by dispatch on its connection
    and recorded when the response has been written."""

    __slots__ = ("stats", "started", "handled", "remote_s")

    def __init__(self, stats: RequestStats, started: float, handled: float,
                 remote_s: float) -> None:
        self.stats = stats
        self.started = started
        self.handled = handled
        self.remote_s = remote_s

    def sent(self, received: float, now: float) -> None:
        """Kafka's breakdown: queued behind the connection's earlier requests, handled here
        (local), waiting on others (remote), writing the response (send), and all of it."""
        stats = self.stats
        stats.total.record((now - received) * 1000.0)
        stats.queue.record((self.started - received) * 1000.0)
        stats.remote.record(self.remote_s * 1000.0)
        stats.local.record((self.handled - self.started - self.remote_s) * 1000.0)
        stats.send.record((now - self.handled) * 1000.0)
