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
    # 1,000 units a second, measured over the live samples (the windows from 19 s: the one
    # from 18 s had its last record 11.1 s ago)
    assert rate.window_size_ms(30_000) == 11_000
    assert rate.measure(30_000) == pytest.approx(1000.0)


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


def test_a_sample_overlapping_the_window_is_kept():
    # Kafka 3.8+ (apache/kafka#15889): samples + 1 are kept, and one is reset only when its
    # last record is out of the monitored window, so the rate does not dip after a boundary
    rate = WindowedRate(2, 1000, now_ms=0)
    for t in range(0, 3000, 100):
        rate.record(100, now_ms=t)
    # the windows from 1000 and 2000 (their records within the last 2 s), over 2,050 ms
    assert rate.window_size_ms(3050) == 2050
    assert rate.measure(3050) == pytest.approx(2000 / 2.05)


def test_a_single_sample_and_the_smallest_window():
    rate = WindowedRate(1, 1000, now_ms=0)
    rate.record(500, now_ms=0)
    # no full window required, but never less than 1 ms (Kafka's Rate.windowSize)
    assert rate.window_size_ms(0) == 1
    assert rate.measure(400) == pytest.approx(1250.0)


def test_throttle_time_rounds_as_java():
    rate = WindowedRate(2, 1000, now_ms=0)
    rate.record(1000.25, now_ms=0)
    # over one window: (1000.25 - 1000) / 1000 * 1000 ms = 0.25 ms, which Math.round makes 0
    assert throttle_time_ms(rate, 1000.0, 0) == 0
    rate.record(0.25, now_ms=0)
    # 0.5 ms: Math.round goes up (Python's round would give 0)
    assert throttle_time_ms(rate, 1000.0, 0) == 1


def test_token_bucket_keeps_its_tokens_across_a_new_rate():
    bucket = TokenBucket(rate=10, samples=11, window_ms=1000, now_ms=0)
    bucket.record(110, now_ms=0)
    bucket.set_rate(100, now_ms=1000)  # 10 tokens earned at the old rate
    assert bucket.tokens == pytest.approx(10)
    bucket.record(30, now_ms=1000)
    assert bucket.throttle_time_ms(1000) == 200


def test_a_rate_needs_windows():
    with pytest.raises(ValueError):
        WindowedRate(0, 1000, now_ms=0)
    with pytest.raises(ValueError):
        WindowedRate(11, 0, now_ms=0)
