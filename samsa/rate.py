"""Kafka's windowed rate and token bucket, and the throttle times its quotas compute from them.

Client quotas (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``) and the
replication throttles measure with Kafka's ``Rate`` over a ``SampledStat``: ``samples`` windows
of ``window_ms`` each (``quota.window.num``, ``quota.window.size.seconds``), the rate being the
total of the live samples over the elapsed time, which is never taken as less than
``samples - 1`` full windows so that a new sensor does not read a burst as a huge rate.
``controller_mutation_rate`` uses Kafka's ``TokenBucket`` (KIP-599). Times are milliseconds on
the caller's monotonic clock.
"""

from __future__ import annotations

import math


class WindowedRate:
    """Kafka's Rate(SampledStat) in units per second."""

    __slots__ = ("samples", "window_ms", "_starts", "_values", "_current")

    def __init__(self, samples: int, window_ms: float, now_ms: float) -> None:
        if samples < 2 or window_ms <= 0:
            raise ValueError("a windowed rate needs at least 2 samples and a positive window")
        self.samples = samples
        self.window_ms = window_ms
        self._starts = [now_ms] + [-math.inf] * (samples - 1)
        self._values = [0.0] * samples
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        current = self._current
        if now_ms - self._starts[current] >= self.window_ms:
            current = self._current = (current + 1) % self.samples
            self._starts[current] = now_ms
            self._values[current] = 0.0
        self._values[current] += value

    def _purge(self, now_ms: float) -> None:
        expire_before = now_ms - self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if start < expire_before and i != self._current:
                self._starts[i] = -math.inf
                self._values[i] = 0.0
        if self._starts[self._current] < expire_before:
            # idle for longer than the whole window: start again from now
            self._starts[self._current] = now_ms
            self._values[self._current] = 0.0

    def window_size_ms(self, now_ms: float) -> float:
        """The time the rate is taken over: since the oldest live sample began, at least
        ``samples - 1`` full windows (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        oldest = min(s for s in self._starts if s != -math.inf)
        elapsed = now_ms - oldest
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: float) -> float:
        window = self.window_size_ms(now_ms)
        return sum(self._values) / (window / 1000.0)


def throttle_time_ms(rate: WindowedRate, bound: float, now_ms: float) -> int:
    """How long a client over ``bound`` must wait for its rate to come back to it (Kafka's
    QuotaUtils.throttleTime): 0 when within the bound."""
    observed = rate.measure(now_ms)
    if bound <= 0:
        return 0 if observed <= 0 else int(rate.samples * rate.window_ms)
    if observed <= bound:
        return 0
    return round((observed - bound) / bound * rate.window_size_ms(now_ms))


def bounded_throttle_time_ms(rate: WindowedRate, bound: float, now_ms: float,
                             max_ms: float) -> int:
    return int(min(throttle_time_ms(rate, bound, now_ms), max_ms))


class TokenBucket:
    """Kafka's TokenBucket (KIP-599): ``rate`` tokens a second, a burst of ``rate`` times the
    whole quota window; a record may take the tokens below zero, and the caller then waits
    until they are back."""

    __slots__ = ("rate", "burst", "tokens", "_last_ms")

    def __init__(self, rate: float, samples: int, window_ms: float, now_ms: float) -> None:
        self.rate = rate
        self.burst = rate * samples * window_ms / 1000.0
        self.tokens = self.burst
        self._last_ms = now_ms

    def _refill(self, now_ms: float) -> None:
        elapsed = max(0.0, now_ms - self._last_ms)
        self.tokens = min(self.burst, self.tokens + self.rate * elapsed / 1000.0)
        self._last_ms = now_ms

    def record(self, value: float, now_ms: float) -> None:
        self._refill(now_ms)
        self.tokens -= value

    def throttle_time_ms(self, now_ms: float) -> int:
        """0 while tokens remain; otherwise the time until they are back to zero."""
        self._refill(now_ms)
        if self.tokens >= 0 or self.rate <= 0:
            return 0
        return math.ceil(-self.tokens / self.rate * 1000.0)


class SimpleRate(WindowedRate):
    """Kafka's SimpleRate, which the replication throttles measure with: the rate over the time
    since the oldest live sample began, at least one window (a new sensor's first burst counts
    in full, where Rate spreads it over ``samples - 1`` windows)."""

    __slots__ = ()

    def window_size_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        oldest = min(s for s in self._starts if s != -math.inf)
        return max(now_ms - oldest, self.window_ms)
