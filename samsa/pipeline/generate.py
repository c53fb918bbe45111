"""``samsa pipeline generate``: simulated frontends publishing activity events (the paper's §4).

Each frontend is its own idempotent producer (``acks=all``) named like a web server
(``frontend-01``). Events are page views, searches and clicks keyed by user, each with its
timestamp and its server's name, to one topic per event type. Every frontend counts the messages
the broker acknowledged, per topic and per time window of the event timestamps, and publishes
those counts as monitoring events to their own topic once a window is over, as the paper's
producers do; the audit reconciles them with what the load job stored.

Time is simulated: ``events`` timestamps spread evenly over ``[start, start + span)`` in order,
so a run of any size fills a chosen number of hours. With ``realtime`` the events are stamped
with the wall clock instead and sent at ``rate`` per second (a live feed for ``stream``).

With ``schema_registry_url`` the frontends register their schemas there (``pipeline.schemas``)
and write the registered ids; with ``evolve_at`` too, the activity schema evolves after that
share of the events: version 2 (a ``referrer`` field with a default) is registered and written
from then on.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.pipeline.events import (
    ACTIVITY_SCHEMA,
    ACTIVITY_SCHEMA_ID,
    ACTIVITY_SCHEMA_V2,
    DEFAULT_TOPICS,
    EVENT_TYPES,
    MONITORING_SCHEMA,
    MONITORING_SCHEMA_ID,
    READERS,
    SCHEMAS,
    Topics,
    encode,
)
from samsa.tools.common import client_config

PAGES = tuple(
    ["/", "/feed", "/jobs", "/messages", "/notifications", "/search"]
    + [f"/profile/{i}" for i in range(1, 31)]
    + [f"/company/{i}" for i in range(1, 15)]
)
QUERIES = ("kafka", "spark", "python", "data engineer", "stream processing", "samsa", "zookeeper")
#: the share of page views, searches and clicks
EVENT_WEIGHTS = (0.6, 0.15, 0.25)
FLUSH_TIMEOUT_S = 60.0
ADMIN_TIMEOUT_S = 30.0


class GenerateError(RuntimeError):
    """The broker did not take the events."""


@dataclass
class Frontend:
    """One simulated web server: a producer and its per-(topic, window) delivered counts."""

    name: str
    producer: Producer
    counts: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    failures: list[str] = field(default_factory=list)

    def on_delivery(self, topic: str, window: int) -> Callable[[Any, Any], None]:
        def callback(err: Any, _msg: Any) -> None:
            if err is None:
                self.counts[(topic, window)] += 1
            else:
                self.failures.append(str(err))

        return callback


@dataclass
class GenerateResult:
    events: int = 0
    monitoring_events: int = 0
    windows: int = 0
    per_topic: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: events written with each schema id
    per_schema: dict[int, int] = field(default_factory=lambda: defaultdict(int))


@dataclass
class Writers:
    """The schema ids the frontends write, with their parsed schemas."""

    activity: tuple[int, Any] = (ACTIVITY_SCHEMA_ID, SCHEMAS[ACTIVITY_SCHEMA_ID])
    monitoring: tuple[int, Any] = (MONITORING_SCHEMA_ID, SCHEMAS[MONITORING_SCHEMA_ID])
    evolved: bool = False

    @classmethod
    def registered(cls, url: str) -> Writers:
        """The same schemas as ``SCHEMAS``, with the ids the registry gives them."""
        from samsa.pipeline.schemas import ACTIVITY_SUBJECT, MONITORING_SUBJECT, register

        activity = register(url, ACTIVITY_SUBJECT, ACTIVITY_SCHEMA, "BACKWARD")
        monitoring = register(url, MONITORING_SUBJECT, MONITORING_SCHEMA, "BACKWARD")
        return cls((activity, SCHEMAS[ACTIVITY_SCHEMA_ID]),
                   (monitoring, SCHEMAS[MONITORING_SCHEMA_ID]))

    def evolve(self, url: str) -> None:
        from samsa.pipeline.schemas import ACTIVITY_SUBJECT, register

        # READERS holds ACTIVITY_SCHEMA_V2 parsed: the same schema written from here on
        self.activity = (register(url, ACTIVITY_SUBJECT, ACTIVITY_SCHEMA_V2),
                         READERS[ACTIVITY_SCHEMA_ID])
        self.evolved = True


def ensure_topics(bootstrap: str, topics: list[str], partitions: int) -> None:
    """Create the topics that do not exist yet (existing ones keep their partitions)."""
    admin = AdminClient(client_config(bootstrap, "samsa-pipeline-generate", short_timeouts=False))
    existing = set(admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics)
    missing = [NewTopic(t, partitions) for t in topics if t not in existing]
    if not missing:
        return
    for topic, future in admin.create_topics(missing).items():
        try:
            future.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise GenerateError(f"cannot create topic {topic}: {exc}") from exc


def generate(
    bootstrap: str,
    *,
    events: int,
    fmt: str = "avro",
    frontends: int = 3,
    users: int = 1000,
    start_ms: int | None = None,
    span_ms: int = 2 * 3600 * 1000,
    window_ms: int = 60_000,
    realtime: bool = False,
    rate: float = 1000.0,
    seed: int | None = None,
    topics: Topics = DEFAULT_TOPICS,
    partitions: int = 3,
    progress: Callable[[int, int], None] | None = None,
    schema_registry_url: str | None = None,
    evolve_at: float | None = None,
) -> GenerateResult:
    """Publish ``events`` activity events and the monitoring events that count them."""
    if events < 0 or frontends < 1 or users < 1 or window_ms < 1 or span_ms < 1:
        raise ValueError("events >= 0, frontends >= 1, users >= 1, window and span > 0")
    if realtime and rate <= 0:
        raise ValueError("rate must be > 0")
    if evolve_at is not None and schema_registry_url is None:
        raise ValueError("the schema evolves only in a schema registry")
    ensure_topics(bootstrap, [*topics.all_activity, topics.monitoring], partitions)
    writers = Writers() if schema_registry_url is None else Writers.registered(schema_registry_url)
    evolve_after = None if evolve_at is None else int(events * evolve_at)
    rng = random.Random(seed)
    fleet = [
        Frontend(
            f"frontend-{i + 1:02d}",
            Producer(
                client_config(
                    bootstrap,
                    f"frontend-{i + 1:02d}",
                    {"enable.idempotence": True, "linger.ms": 5},
                    short_timeouts=False,
                )
            ),
        )
        for i in range(frontends)
    ]
    if start_ms is None:  # whole windows, ending at the last one before now
        now = int(time.time() * 1000)
        start_ms = now - now % window_ms - span_ms
    result = GenerateResult()
    open_window: int | None = None
    began = time.monotonic()
    for n in range(events):
        if realtime:
            due = began + n / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            ts = int(time.time() * 1000)
        else:
            ts = start_ms + (n * span_ms) // max(events, 1)
        window = ts - ts % window_ms
        if n == evolve_after and schema_registry_url is not None:
            writers.evolve(schema_registry_url)
        if open_window is not None and window != open_window:
            result.monitoring_events += _close_windows(fleet, topics, fmt, window_ms, writers)
            result.windows += 1
        open_window = window
        event_type = rng.choices(EVENT_TYPES, EVENT_WEIGHTS)[0]
        frontend = fleet[rng.randrange(frontends)]
        user = f"user-{rng.randrange(users):05d}"
        event = {
            "event_type": event_type,
            "user_id": user,
            "page": PAGES[min(int(rng.paretovariate(1.2)) - 1, len(PAGES) - 1)],
            "query": rng.choice(QUERIES) if event_type == "search" else None,
            "target": rng.choice(PAGES) if event_type == "click" else None,
            "server": frontend.name,
            "timestamp": ts,
        }
        if writers.evolved:
            event["referrer"] = rng.choice(PAGES) if rng.random() < 0.5 else None
        schema_id, schema = writers.activity
        topic = topics.activity(event_type)
        _produce(
            frontend,
            topic,
            user.encode(),
            encode(event, schema_id, fmt, schema),
            ts,
            frontend.on_delivery(topic, window),
        )
        result.events += 1
        result.per_topic[topic] += 1
        result.per_schema[schema_id] += 1
        if progress is not None and (n + 1) % max(events // 10, 1) == 0 and n + 1 < events:
            progress(n + 1, events)
    if open_window is not None:
        result.monitoring_events += _close_windows(fleet, topics, fmt, window_ms, writers)
        result.windows += 1
    if progress is not None:
        progress(events, events)
    return result


def _produce(
    frontend: Frontend,
    topic: str,
    key: bytes,
    value: bytes,
    timestamp: int,
    callback: Callable[[Any, Any], None],
) -> None:
    deadline = time.monotonic() + FLUSH_TIMEOUT_S
    while True:
        try:
            frontend.producer.produce(
                topic, value=value, key=key, timestamp=timestamp, on_delivery=callback
            )
            return
        except BufferError:  # the producer's queue is full: let deliveries drain it
            if time.monotonic() > deadline:
                raise GenerateError(f"{frontend.name}: the broker took nothing for "
                                    f"{FLUSH_TIMEOUT_S:.0f} s") from None
            frontend.producer.poll(0.1)


def _close_windows(fleet: list[Frontend], topics: Topics, fmt: str, window_ms: int,
                   writers: Writers) -> int:
    """Wait for every delivery, then publish each frontend's counts of the windows so far."""
    sent = 0
    for frontend in fleet:
        _flush(frontend)
        for (topic, window), count in sorted(frontend.counts.items()):
            event = {
                "server": frontend.name,
                "topic": topic,
                "window_start": window,
                "window_ms": window_ms,
                "count": count,
            }
            _produce(
                frontend,
                topics.monitoring,
                frontend.name.encode(),
                encode(event, writers.monitoring[0], fmt, writers.monitoring[1]),
                int(time.time() * 1000),
                _fail_on_error(frontend),
            )
            sent += 1
        frontend.counts.clear()
        _flush(frontend)
    return sent


def _fail_on_error(frontend: Frontend) -> Callable[[Any, Any], None]:
    def callback(err: Any, _msg: Any) -> None:
        if err is not None:
            frontend.failures.append(f"monitoring event: {err}")

    return callback


def _flush(frontend: Frontend) -> None:
    left = frontend.producer.flush(FLUSH_TIMEOUT_S)
    if left:
        raise GenerateError(f"{frontend.name}: {left} messages not delivered within "
                            f"{FLUSH_TIMEOUT_S:.0f} s")
    if frontend.failures:
        raise GenerateError(f"{frontend.name}: delivery failed: {frontend.failures[0]}")
