"""What the console's charts draw: a sampler that reads the cluster every ``interval_s`` and
keeps the last ``keep`` points of each series, and the last round's list of topics, which the
topics page shows while it is fresh (a large cluster's list costs the broker hundreds of
milliseconds to gather: the page is not made to wait for it).

Series: ``messages_in`` (messages per second into the cluster, from the growth of the topics'
high watermarks), ``topic:<name>`` (the same per topic), ``lag:<group>`` (a group's total
lag) and, when given the broker's Prometheus endpoint (or several, comma-separated),
``bytes_in`` and ``bytes_out`` (bytes per second, from Kafka's
``kafka_server_brokertopicmetrics_bytesin_total`` / ``_bytesout_total`` counters).
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from collections import deque

from prometheus_client.parser import text_string_to_metric_families

from samsa.console.cluster_view import ClusterView
from samsa.console.model import ConsoleError, TopicSummary

log = logging.getLogger(__name__)

COUNTERS = {"bytes_in": "kafka_server_brokertopicmetrics_bytesin_total",
            "bytes_out": "kafka_server_brokertopicmetrics_bytesout_total"}
SCRAPE_TIMEOUT_S = 5.0


class History:
    def __init__(self, view: ClusterView, metrics_url: str | None = None,
                 interval_s: float = 5.0, keep: int = 360) -> None:
        self.view = view
        self.metrics_urls = [u.strip() for u in (metrics_url or "").split(",") if u.strip()]
        self.interval = interval_s
        self.keep = keep
        self.last_error: str | None = None  # of the last round, for the page
        self._series: dict[str, deque[tuple[float, float]]] = {}
        self._rates: dict[str, float] = {}
        self._topics: tuple[float, list[TopicSummary]] | None = None  # (monotonic time, list)
        # the previous round's readings: (time, topic -> sum of high watermarks, counters)
        self._previous: tuple[float, dict[str, int], dict[str, float]] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="samsa-console-history",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the sampler; waits for a round under way at most the view's timeout."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=self.view.timeout + SCRAPE_TIMEOUT_S + 1)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:  # keep sampling: the next round may do better
                log.exception("console history: a sampling round failed")
            self._stop.wait(self.interval)

    def sample(self) -> None:
        """One round: read offsets, lags and metrics; append a point to each series."""
        now = time.time()
        errors: list[str] = []
        offsets: dict[str, int] | None = None
        topics: list[TopicSummary] | None = None
        lags: dict[str, int] = {}
        try:
            topics = self.view.topics()
            read_at = time.monotonic()
            offsets = {t.name: t.end_offsets for t in topics if t.end_offsets is not None}
        except ConsoleError as exc:
            errors.append(str(exc))
        try:
            lags = self.view.lags()
        except ConsoleError as exc:
            errors.append(str(exc))
        counters = self._scrape(errors)
        with self._lock:
            for group, lag in lags.items():
                self._append(f"lag:{group}", now, float(lag))
            if offsets is not None:
                self._rates_from(now, offsets, counters)
            if topics is not None:
                self._topics = (read_at, topics)
            self.last_error = "; ".join(errors) or None

    def _rates_from(self, now: float, offsets: dict[str, int],
                    counters: dict[str, float]) -> None:
        previous, self._previous = self._previous, (now, offsets, counters)
        if previous is None:
            return
        then, before, counted = previous
        elapsed = now - then
        if elapsed <= 0:
            return
        rates: dict[str, float] = {}
        for topic, total in offsets.items():
            if topic in before:
                # a topic deleted and made again starts over: no negative rates
                rates[topic] = max(0, total - before[topic]) / elapsed
        self._rates = rates
        for topic, rate in rates.items():
            self._append(f"topic:{topic}", now, rate)
        self._append("messages_in", now, sum(rates.values()))
        for name, value in counters.items():
            if name in counted and value >= counted[name]:  # lower: a broker restarted
                self._append(name, now, (value - counted[name]) / elapsed)

    def _append(self, name: str, at: float, value: float) -> None:
        series = self._series.get(name)
        if series is None:
            series = self._series[name] = deque(maxlen=self.keep)
        series.append((at, value))

    def _scrape(self, errors: list[str]) -> dict[str, float]:
        """The byte counters summed over the metrics endpoints (all of them, or none)."""
        if not self.metrics_urls:
            return {}
        totals = dict.fromkeys(COUNTERS, 0.0)
        for url in self.metrics_urls:
            try:
                with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
                    text = response.read().decode("utf-8")
            except (urllib.error.URLError, OSError) as exc:
                errors.append(f"metrics {url}: {getattr(exc, 'reason', exc)}")
                return {}
            wanted = {sample: name for name, sample in COUNTERS.items()}
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if sample.name in wanted and not sample.labels:
                        totals[wanted[sample.name]] += sample.value
        return totals

    def recent_topics(self) -> list[TopicSummary] | None:
        """The last round's topics if read within one and a half intervals and nothing was
        changed through the console since; else None: read them now."""
        with self._lock:
            if self._topics is None:
                return None
            read_at, topics = self._topics
        if time.monotonic() - read_at > 1.5 * self.interval:
            return None
        return topics

    def forget_topics(self) -> None:
        """A topic was created, deleted or changed here: the next page reads them anew."""
        with self._lock:
            self._topics = None

    def topic_rates(self) -> dict[str, float]:
        """Messages per second of each topic over the last two rounds."""
        with self._lock:
            return dict(self._rates)

    def series(self, name: str) -> list[tuple[float, float]]:
        """(unix time in s, value) points of a series, oldest first; [] before any."""
        with self._lock:
            return list(self._series.get(name, ()))

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._series)
