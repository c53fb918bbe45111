"""The controller's duties in ZooKeeper mode, on the broker that won the election.

It watches ``/brokers/topics`` and the broker registrations, and writes each partition's
leader and ISR to ``/brokers/topics/<t>/partitions/<p>/state`` by the rules of
leader_election.py: states for new topics, a new leader from the ISR when a leader's broker
goes, the last in-sync replica back as leader of an offline partition. Every write carries
the controller epoch and is conditional on the znode version it read (a leader may have
changed the ISR meanwhile: read again and decide again). The brokers watch those znodes and
apply them (replica_manager.py); there are no LeaderAndIsr requests.

Events run one at a time on a single worker thread (Kafka's controller event queue); all of
them are blocking ZooKeeper calls.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable

from samsa.cluster.leader_election import initial_state, on_broker_back, on_brokers_lost
from samsa.cluster.zk_client import ZkClient
from samsa.cluster.zk_data import PartitionState

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, zk: ZkClient, unclean: Callable[[str], bool]) -> None:
        """``unclean(topic)``: the topic's unclean.leader.election.enable."""
        self.zk = zk
        self.unclean = unclean
        self.epoch = 0
        self.active = False
        self.live: set[int] = set()
        self._known_topics: set[str] = set()
        self._events = concurrent.futures.ThreadPoolExecutor(1, "samsa-controller")
        self._watching = False

    def activate(self, epoch: int) -> None:
        """This broker won the election with ``epoch``: take over every partition."""
        self.epoch, self.active = epoch, True
        self._submit(self._take_over)

    def deactivate(self) -> None:
        self.active = False

    def close(self) -> None:
        self.active = False
        self._events.shutdown(wait=True, cancel_futures=True)

    def _submit(self, fn: Callable[..., None], *args: object) -> None:
        def run() -> None:
            if not self.active:
                return
            try:
                fn(*args)
            except Exception:
                log.exception("controller event %s failed", getattr(fn, "__name__", fn))

        try:
            self._events.submit(run)
        except RuntimeError:  # shut down
            pass

    # --- events --------------------------------------------------------------------------------

    def _take_over(self) -> None:
        self.live = set(self.zk.live_brokers())
        self._known_topics = set()
        for topic in self.zk.topics():
            self._init_topic(topic)
        if not self._watching:
            self._watching = True
            self.zk.watch_brokers(lambda ids: self._submit(self._brokers_changed, set(ids)))
            self.zk.watch_topics(lambda names: self._submit(self._topics_changed, set(names)))
        log.info("controller (epoch %d) took over %d topics with brokers %s", self.epoch,
                 len(self._known_topics), sorted(self.live))

    def _topics_changed(self, names: set[str]) -> None:
        for topic in sorted(names - self._known_topics):
            self._init_topic(topic)
        self._known_topics &= names

    def _init_topic(self, topic: str) -> None:
        """States for a topic's partitions that have none; the others are brought in line
        with the live brokers (a controller taking over after failures)."""
        assignment = self.zk.topic_assignment(topic)
        if assignment is None:
            return
        self._known_topics.add(topic)
        for index, replicas in sorted(assignment.partitions.items()):
            found = self.zk.partition_state(topic, index)
            if found is None:
                state = initial_state(replicas.replicas, self.live, self.epoch)
                if self.zk.create_partition_state(topic, index, state) is not None:
                    log.info("%s-%d: leader %d, ISR %s (new)", topic, index, state.leader,
                             list(state.isr))
                    continue
            self._update(topic, index, replicas.replicas, self.live, set())

    def _brokers_changed(self, live: set[int]) -> None:
        back = live - self.live
        self.live = set(live)
        for topic in sorted(self._known_topics):
            assignment = self.zk.topic_assignment(topic)
            if assignment is None:
                continue
            for index, replicas in sorted(assignment.partitions.items()):
                self._update(topic, index, replicas.replicas, live, back)

    def _update(self, topic: str, index: int, replicas: tuple[int, ...], live: set[int],
                back: set[int]) -> None:
        for _ in range(5):  # a leader's ISR write may race ours: read and decide again
            found = self.zk.partition_state(topic, index)
            if found is None:
                return
            state, version = found
            new = self._decide(topic, state, replicas, live, back)
            if new is None:
                return
            if self.zk.update_partition_state(topic, index, new, version) is not None:
                lost = new.leader not in state.isr and new.leader >= 0
                log.log(logging.WARNING if new.leader < 0 or lost else logging.INFO,
                        "%s-%d: leader %d -> %d, ISR %s -> %s, leader epoch %d%s", topic, index,
                        state.leader, new.leader, list(state.isr), list(new.isr),
                        new.leader_epoch,
                        " (unclean election: records may be lost)" if lost else "")
                return
        log.warning("%s-%d: gave up updating the partition state (it kept changing)",
                    topic, index)

    def _decide(self, topic: str, state: PartitionState, replicas: tuple[int, ...],
                live: set[int], back: set[int]) -> PartitionState | None:
        new = on_brokers_lost(state, replicas, live, self.epoch, unclean=self.unclean(topic))
        if new is None:
            for broker in sorted(back):
                new = on_broker_back(state, replicas, broker, self.epoch)
                if new is not None:
                    break
        return new
