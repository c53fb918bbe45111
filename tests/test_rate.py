"""Kafka's windowed rate, token bucket and throttle times (samsa/rate.py), against the numbers
Kafka's own Rate and QuotaUtils give for the same records."""

import pytest

from samsa.rate import TokenBucket, WindowedRate, bounded_throttle_time_ms, throttle_time_ms


def test_a_new_rate_counts_at_least_samples_minus_one_windows():
    rate = WindowedRate(11, 1000, now_ms=0)
    rate.record(10_000, now_ms=0)
    # 10,000 over the 10 full windows a new sensor is given, not over 0 ms
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(1000.0)


def test_steady_traffic_measures_its_rate():
    rate = WindowedRate(11, 1000, now_ms=0)
    for t in range(0, 30_000, 100):
        rate.record(100, now_ms=t)
    # 1,000 units a second, measured over the live samples (10 to 11 windows)
    assert rate.measure(30_000) == pytest.approx(1000.0, rel=0.1)


def test_old_samples_expire():
    rate = WindowedRate(11, 1000, now_ms=0)
    rate.record(1_000_000, now_ms=0)
    assert rate.measure(1) > 1000
    assert rate.measure(60_000) == 0.0


def test_throttle_time_brings_the_rate_back_to_the_bound():
    rate = WindowedRate(11, 1000, now_ms=0)
    rate.record(20_000, now_ms=0)
    bound = 1000.0
    # observed 2,000/s over a 10 s window: (2000-1000)/1000 * 10 s, the wait after which the
    # same total over the grown window is at the bound
    assert throttle_time_ms(rate, bound, 0) == 10_000
    rate.record(10_000, now_ms=5_000)
    # 30,000 over 10 s (the window's floor): 3,000/s, twice over the bound for 10 s
    assert throttle_time_ms(rate, bound, 5_000) == 20_000
    assert throttle_time_ms(rate, 1e9, 0) == 0
    assert bounded_throttle_time_ms(rate, bound, 0, max_ms=1000) == 1000


def test_token_bucket_throttles_once_the_burst_is_spent():
    bucket = TokenBucket(rate=10, samples=11, window_ms=1000, now_ms=0)
    assert bucket.burst == 110
    bucket.record(100, now_ms=0)
    assert bucket.throttle_time_ms(0) == 0
    bucket.record(30, now_ms=0)
    # 20 tokens short at 10 a second
    assert bucket.throttle_time_ms(0) == 2000
    assert bucket.throttle_time_ms(2000) == 0


def test_a_rate_needs_windows():
    with pytest.raises(ValueError):
        WindowedRate(1, 1000, now_ms=0)
