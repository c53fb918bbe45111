"""Electing the primary among the registry instances that share a schemas topic.

Every eligible instance joins the consumer group ``schema.registry.group.id`` subscribed to
the schemas topic (one partition): the member the group assigns partition 0 is the primary,
and only it writes. Each member's client.id is its own URL, so that a secondary finds the
primary's URL by describing the group (the member that holds partition 0) and forwards writes
there. When the primary leaves (stops, or misses the session timeout), the group rebalances
and another member gets the partition.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from samsa.registry.kafka_client import client_config

log = logging.getLogger(__name__)

_POLL_S = 0.1
# how long a secondary trusts the primary URL it found (a rebalance may move it)
_PRIMARY_CACHE_S = 2.0


class PrimaryElection:
    def __init__(self, bootstrap: str, topic: str, group_id: str, url: str,
                 client_extra: dict[str, Any] | None = None,
                 session_timeout_ms: int = 10000, eligible: bool = True) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group_id = group_id
        self.url = url
        self._extra = client_extra or {}
        self._session_timeout_ms = session_timeout_ms
        # an ineligible instance (leader.eligibility=false) never joins: it only looks the
        # primary up
        self.eligible = eligible
        self.is_primary = False
        # set each time this instance becomes primary: read the whole topic before writing
        self.needs_catch_up = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Consumer | None = None
        self._admin: AdminClient | None = None
        self._cached: tuple[float, str | None] = (0.0, None)

    def start(self) -> None:
        self._admin = AdminClient(client_config(self.bootstrap, f"{self.url}-election-admin",
                                                self._extra))
        if not self.eligible:
            return
        self._consumer = Consumer(client_config(self.bootstrap, self.url, {
            "group.id": self.group_id,
            "enable.auto.commit": False,
            "session.timeout.ms": self._session_timeout_ms,
            "heartbeat.interval.ms": max(100, self._session_timeout_ms // 10),
            **self._extra,
        }))
        self._consumer.subscribe([self.topic], on_assign=self._assigned,
                                 on_revoke=self._revoked, on_lost=self._revoked)
        self._thread = threading.Thread(target=self._run, name="schema-registry-election",
                                        daemon=True)
        self._thread.start()

    def _assigned(self, consumer: Consumer, partitions: list[Any]) -> None:
        primary = any(p.topic == self.topic and p.partition == 0 for p in partitions)
        if primary and not self.is_primary:
            log.info("this schema registry (%s) is now the primary", self.url)
            self.needs_catch_up.set()
        self.is_primary = primary
        self._cached = (0.0, None)
        # membership only: the store reads the records, not this consumer (assigned here so
        # that the pause applies to the assignment)
        consumer.assign(partitions)
        if partitions:
            consumer.pause(partitions)

    def _revoked(self, consumer: Consumer, partitions: list[Any]) -> None:
        if self.is_primary:
            log.info("this schema registry (%s) is no longer the primary", self.url)
        self.is_primary = False
        self._cached = (0.0, None)

    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self._stop.is_set():
            try:
                consumer.poll(_POLL_S)
            except KafkaException as exc:
                log.warning("primary election: %s", exc)

    def primary_url(self, timeout_s: float = 10.0) -> str | None:
        """The primary's URL (this instance's own when it is the primary), None if the group
        has none right now."""
        if self.is_primary:
            return self.url
        found_at, url = self._cached
        if url is not None and time.monotonic() - found_at < _PRIMARY_CACHE_S:
            return url
        assert self._admin is not None
        try:
            described = self._admin.describe_consumer_groups(
                [self.group_id], request_timeout=timeout_s)[self.group_id].result(timeout_s)
        except KafkaException as exc:
            log.warning("cannot describe the group %s: %s", self.group_id, exc)
            return None
        for member in described.members:
            assignment = member.assignment.topic_partitions if member.assignment else []
            if any(p.topic == self.topic and p.partition == 0 for p in assignment):
                self._cached = (time.monotonic(), member.client_id)
                return str(member.client_id)
        return None

    def wait_for_primary(self, timeout_s: float) -> str | None:
        """The primary's URL once the group has one; None after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.primary_url(timeout_s)
            if found is not None or time.monotonic() >= deadline or self._stop.is_set():
                return found
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self._consumer is not None:
            self._consumer.close()  # leaves the group: another instance is elected at once
            self._consumer = None
        self.is_primary = False
