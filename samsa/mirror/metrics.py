"""A flow's counters, with MirrorSourceMetrics' names (record-count, byte-count, record-age-ms,
replication-latency-ms) and the consumer lag, and the progress line printed from them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class FlowMetrics:
    flow: str
    record_count: int = 0
    byte_count: int = 0
    record_age_ms: float = 0.0  # of the last record copied: target ack time - its timestamp
    replication_latency_ms: float = 0.0  # of the last record: ack - when it was consumed
    lag: int = 0  # source high watermark - position, over the partitions this worker copies
    partitions: int = 0
    checkpoints: int = 0

    def copied(self, records: int, size: int, age_ms: float, latency_ms: float) -> None:
        # one writer (the flow's thread); readers only print
        self.record_count += records
        self.byte_count += size
        self.record_age_ms = age_ms
        self.replication_latency_ms = latency_ms


@dataclass
class Progress:
    """Rates between two progress lines."""

    flows: list[FlowMetrics]
    _last: dict[str, tuple[float, int, int]] = field(default_factory=dict)

    def totals(self) -> list[FlowMetrics]:
        """One line's worth per flow: its tasks' counters added up."""
        flows: dict[str, FlowMetrics] = {}
        for m in self.flows:
            total = flows.setdefault(m.flow, FlowMetrics(m.flow))
            total.record_count += m.record_count
            total.byte_count += m.byte_count
            total.lag += m.lag
            total.partitions += m.partitions
            total.checkpoints += m.checkpoints
            total.record_age_ms = max(total.record_age_ms, m.record_age_ms)
        return list(flows.values())

    def line(self) -> str:
        now = time.monotonic()
        parts = []
        for m in self.totals():
            t0, r0, b0 = self._last.get(m.flow, (now, m.record_count, m.byte_count))
            dt = max(now - t0, 1e-9)
            rate = (m.record_count - r0) / dt if now > t0 else 0.0
            mb = (m.byte_count - b0) / dt / 1e6 if now > t0 else 0.0
            self._last[m.flow] = (now, m.record_count, m.byte_count)
            parts.append(f"{m.flow}: {m.record_count} records ({rate:.0f} records/s, "
                         f"{mb:.2f} MB/s), lag {m.lag} records on {m.partitions} partitions, "
                         f"record-age-ms {m.record_age_ms:.0f}, checkpoints {m.checkpoints}")
        return "mirror " + "; ".join(parts)
