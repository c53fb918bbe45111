"""The replication throttles (Kafka's ReplicationQuotaManager, KIP-73): a rate in bytes a
second over the replicas a topic config names, measured by Kafka's SimpleRate over
``replication.quota.window.num`` windows of ``replication.quota.window.size.seconds``.

* leader side (``leader.replication.throttled.rate``): a follower's Fetch leaves out the records
  of a partition ``leader.replication.throttled.replicas`` names for this broker while the
  follower is out of the ISR and the rate is over the bound (the partition is answered, with no
  records); the bytes of every throttled partition sent to followers are recorded.
* follower side (``follower.replication.throttled.rate``): the replica fetcher does not ask for
  a partition ``follower.replication.throttled.replicas`` names for this broker while its log
  has not caught up with the leader's high watermark and the rate is over the bound; the bytes
  of every throttled partition fetched are recorded.

Which partitions a topic throttles is its config (``LogConfig.leader_throttled`` /
``follower_throttled``); the rates are dynamic broker configs (unlimited by default).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from samsa.config import LONG_MAX, BrokerConfig
from samsa.rate import SimpleRate


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class ReplicationQuota:
    """One direction's throttle: its bound and the rate of the throttled bytes."""

    def __init__(self, samples: int, window_s: int, bound: int = LONG_MAX,
                 clock: Callable[[], float] = _now_ms) -> None:
        self.bound = bound
        self.clock = clock
        self._rate = SimpleRate(samples, window_s * 1000.0, clock())

    def record(self, size: int) -> None:
        if size:
            self._rate.record(size, self.clock())

    def exceeded(self) -> bool:
        """Whether the throttled bytes went over the bound (Kafka's isQuotaExceeded)."""
        return self.bound < LONG_MAX and self._rate.measure(self.clock()) > self.bound

    def rate(self) -> float:
        """The measured rate, bytes a second."""
        return self._rate.measure(self.clock())


RATE_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                       "replica.alter.log.dirs.io.max.bytes.per.second"})


class ReplicationQuotas:
    """The broker's throttles: leader, follower, and Kafka's replica moves between log
    directories (``replica.alter.log.dirs.io.max.bytes.per.second``: ``LogDirMover``'s copy)."""

    def __init__(self, config: BrokerConfig) -> None:
        samples = config.get("replication.quota.window.num")
        window_s = config.get("replication.quota.window.size.seconds")
        self.leader = ReplicationQuota(samples, window_s)
        self.follower = ReplicationQuota(samples, window_s)
        self.alter_log_dirs = ReplicationQuota(samples, window_s)
        self.update(config)

    def update(self, config: BrokerConfig) -> None:
        """The bounds as the broker's config sets them now (Kafka's BrokerConfigHandler)."""
        self.leader.bound = config.get("leader.replication.throttled.rate")
        self.follower.bound = config.get("follower.replication.throttled.rate")
        self.alter_log_dirs.bound = config.get("replica.alter.log.dirs.io.max.bytes.per.second")
