"""What the metrics add to one request, timed alone.

Side by side, a broker with its metrics on and one with them off differ by less than this
machine's noise (``make bench-metrics`` runs both, ``request_cost.py --metrics`` counts the
calls): so this times, in this process, exactly the work the metrics add to a request, to put
beside the broker's CPU per request (``request_cost.py``: tens of microseconds).

* ``request``: every request: two clock reads around the handler, the stats looked up, the
  response's send time read and the five stages recorded (``RequestStats.record``).
* ``produce_partition``: each partition of a produce (``BrokerTopicStats.produced``).
* ``fetch_partition``: each partition of a consumer's fetch (``BrokerTopicStats.fetched``).

    .venv/bin/python bench/metrics_cost.py
"""

from __future__ import annotations

import json
import time
import timeit

from samsa.metrics import BrokerMetrics

ROUNDS, NUMBER = 5, 200_000


def main() -> None:
    metrics = BrokerMetrics()

    def request() -> None:
        started = time.monotonic()
        stats = metrics.requests.get(("Produce", 9)) or metrics.request("Produce", 9)
        timing = (stats, started, time.monotonic(), 0.0)
        stats, started, handled, remote_s = timing
        stats.record(started, started, handled, remote_s, time.monotonic())

    def produce_partition() -> None:
        metrics.topics.produced("orders", 16_384, 50)

    def fetch_partition() -> None:
        metrics.topics.fetched("orders", 1_048_576, False)

    for name, work in (("request", request), ("produce_partition", produce_partition),
                       ("fetch_partition", fetch_partition)):
        best = min(timeit.repeat(work, number=NUMBER, repeat=ROUNDS)) / NUMBER
        print(json.dumps({"work": name, "us": round(best * 1e6, 3)}), flush=True)


if __name__ == "__main__":
    main()
