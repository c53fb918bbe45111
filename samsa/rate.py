"""Kafka's windowed rate and token bucket, and the throttle times its quotas compute from them.

Client quotas (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``) and the
replication throttles measure with Kafka's ``Rate`` over a ``SampledStat`` (Kafka 3.8+):
samples of ``window_ms`` each (``quota.window.num``, ``quota.window.size.seconds``), up to
``samples + 1`` of them kept (the oldest may start before the monitored window while
overlapping it), a sample whose last record is ``samples`` windows old or more being reset;
the rate is the total of the samples over the time since the oldest one started, which is
never taken as less than ``samples - 1`` full windows so that a new sensor does not read a
burst as a huge rate. ``controller_mutation_rate`` uses Kafka's ``TokenBucket`` (KIP-599).
Times are milliseconds on the caller's monotonic clock.
"""

from __future__ import annotations

import math


def java_round(value: float) -> int:
    """Java's Math.round: halves go up (Python's round goes to the even neighbour)."""
    return math.floor(value + 0.5)


class WindowedRate:
    """Kafka's Rate(SampledStat) in units per second."""

    __slots__ = ("samples", "window_ms", "_starts", "_last", "_values", "_current")

    def __init__(self, samples: int, window_ms: float, now_ms: float) -> None:
        if samples < 1 or window_ms <= 0:
            raise ValueError("a windowed rate needs at least 1 sample and a positive window")
        self.samples = samples
        self.window_ms = window_ms
        # Kafka's Sample: start time, time of the last record, value; created as needed
        self._starts = [now_ms]
        self._last = [now_ms]
        self._values = [0.0]
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        current = self._current
        if now_ms - self._starts[current] >= self.window_ms:
            current = self._current = (current + 1) % (self.samples + 1)
            if current == len(self._starts):
                self._starts.append(now_ms)
                self._last.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[current] = now_ms
                self._values[current] = 0.0
        self._values[current] += value
        self._last[current] = now_ms

    def _purge(self, now_ms: float) -> None:
        """Kafka's purgeObsoleteSamples: samples without a record in the monitored window
        start again, empty, from now."""
        expire_age = self.samples * self.window_ms
        last = self._last
        for i, at in enumerate(last):
            if now_ms - at >= expire_age:
                self._starts[i] = last[i] = now_ms
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: float) -> float:
        """The time the rate is taken over: since the oldest sample began, at least
        ``samples - 1`` full windows, at least 1 ms (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def total(self, now_ms: float) -> float:
        self._purge(now_ms)
        return sum(self._values)

    def measure(self, now_ms: float) -> float:
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def throttle_time_ms(rate: WindowedRate, bound: float, now_ms: float) -> int:
    """How long a client over ``bound`` must wait for its rate to come back to it (Kafka's
    QuotaUtils.throttleTime: (O - T) / T * W): 0 when within the bound."""
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    if bound <= 0:  # no rate is allowed: the whole window
        return int(rate.samples * rate.window_ms)
    return java_round((observed - bound) / bound * rate.window_size_ms(now_ms))


def bounded_throttle_time_ms(rate: WindowedRate, bound: float, now_ms: float,
                             max_ms: float) -> int:
    """QuotaUtils.boundedThrottleTime: the throttle time, at most ``max_ms``."""
    return int(min(throttle_time_ms(rate, bound, now_ms), max_ms))


class TokenBucket:
    """Kafka's TokenBucket (KIP-599): ``rate`` tokens a second, a burst of ``rate`` times the
    whole quota window (``samples`` windows); a record may take the tokens below zero, and
    the caller then waits until they are back."""

    __slots__ = ("rate", "samples", "window_ms", "tokens", "_last_ms")

    def __init__(self, rate: float, samples: int, window_ms: float, now_ms: float) -> None:
        self.rate = rate
        self.samples = samples
        self.window_ms = window_ms
        self.tokens = self.burst
        self._last_ms = now_ms

    @property
    def burst(self) -> float:
        return self.rate * self.samples * self.window_ms / 1000.0

    def set_rate(self, rate: float, now_ms: float) -> None:
        """A new quota: the tokens earned so far at the old rate are kept (up to the new
        burst), as Kafka's bucket reads its quota at each use."""
        self._refill(now_ms)
        self.rate = rate
        self.tokens = min(self.tokens, self.burst)

    def _refill(self, now_ms: float) -> None:
        elapsed = max(0.0, now_ms - self._last_ms)
        self.tokens = min(self.burst, self.tokens + self.rate * elapsed / 1000.0)
        self._last_ms = now_ms

    def record(self, value: float, now_ms: float) -> None:
        self._refill(now_ms)
        self.tokens = min(self.burst, self.tokens - value)

    def throttle_time_ms(self, now_ms: float) -> int:
        """0 while tokens remain; otherwise the time until they are back to zero
        (ControllerMutationQuotaManager.throttleTimeMs: -tokens / rate)."""
        self._refill(now_ms)
        if self.tokens >= 0:
            return 0
        if self.rate <= 0:
            return int(self.samples * self.window_ms)
        return java_round(-self.tokens / self.rate * 1000.0)


class SimpleRate(WindowedRate):
    """Kafka's SimpleRate, which the replication throttles measure with: the rate over the time
    since the oldest sample began, at least one window (a new sensor's first burst counts in
    full, where Rate spreads it over ``samples - 1`` windows)."""

    __slots__ = ()

    def window_size_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        return max(now_ms - min(self._starts), self.window_ms)
