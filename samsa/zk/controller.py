"""The controller's duties in ZooKeeper mode, on the broker that won the election.

It watches ``/brokers/topics`` (and each topic's assignment), the broker registrations,
``/admin/delete_topics`` and ``/log_dir_event_notification``, and writes each partition's leader
and ISR to ``/brokers/topics/<t>/partitions/<p>/state`` by the rules of leader_election.py:
states for new topics and partitions, a new leader from the ISR when a leader's broker goes
(or its replica goes offline with a failed log directory: such a replica counts as a lost
broker for its partition until that broker registers again), the last in-sync replica back as
leader of an offline partition. Every write is conditional on the znode
version it read (a leader may have changed the ISR meanwhile: read again and decide again) and
on the ``/controller_epoch`` version this broker won with (a deposed controller's write fails
with ControllerMovedError and it stops acting). The brokers watch those znodes and apply them
(replica_manager.py); there are no LeaderAndIsr requests.

Requests the controller serves for the brokers and admin clients (``call``): controlled
shutdown (leaderships move away from a stopping broker), preferred and unclean leader
elections (ElectLeaders), partition reassignments (reassignment.py). A timer checks running
reassignments and, with ``auto.leader.rebalance.enable``, the leader imbalance.

Events run one at a time on a single worker thread (Kafka's controller event queue); all of
them are blocking ZooKeeper calls.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from samsa.cluster.placement import check_target
from samsa.cluster.topic_admin import TP, Outcome
from samsa.errors import ErrorCode
from samsa.metrics import ThreadedHistogram
from samsa.zk import reassignment
from samsa.zk.leader_election import (
    initial_state,
    on_broker_back,
    on_brokers_lost,
    on_controlled_shutdown,
    preferred_leader,
)
from samsa.zk.zk_client import ControllerMovedError, ZkClient
from samsa.zk.zk_data import NO_LEADER, PartitionState, ReplicaAssignment, TopicAssignment

log = logging.getLogger(__name__)

T = TypeVar("T")
_TICK_SECONDS = 0.5
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders election types
NOT_NEEDED = "Leader election not needed for topic partition."


class NotControllerError(RuntimeError):
    """This broker is not (or no longer) the controller."""


class Controller:
    def __init__(self, zk: ZkClient, broker_id: int, setting: Callable[[str], Any],
                 unclean: Callable[[str], bool]) -> None:
        """``setting(key)``: a broker config value; ``unclean(topic)``: the topic's
        unclean.leader.election.enable (as ZooKeeper has it now)."""
        self.zk = zk
        self.broker_id = broker_id
        self.setting = setting
        self.unclean = unclean
        self.epoch = 0
        self.fence: int | None = None
        self.active = False
        self.live: set[int] = set()
        self.shutting_down: set[int] = set()
        # broker -> its replicas in failed log directories (Kafka's replicasOnOfflineDirs)
        self.offline_replicas: dict[int, set[TP]] = {}
        self._known_topics: set[str] = set()
        self._watched_topics: set[str] = set()
        self._reassigning: dict[TP, tuple[int, ...]] = {}  # partition -> target replicas
        self._deleting: set[str] = set()  # topics waiting for their replicas' deletion
        # Kafka's controller metrics: partitions with no leader as last written or read,
        # leader elections (how long each took) and the unclean ones among them
        self.offline: set[TP] = set()
        self.elections = ThreadedHistogram()
        self.unclean_elections = 0
        self._events = concurrent.futures.ThreadPoolExecutor(1, "samsa-controller")
        self._watching = False
        self._closed = threading.Event()
        self._since_rebalance = 0.0
        self._ticker = threading.Thread(target=self._tick_loop, name="samsa-controller-tick",
                                        daemon=True)
        self._ticker.start()

    def activate(self, epoch: int, fence: int) -> None:
        """This broker won the election with ``epoch`` (``fence``: the epoch znode's version
        its writes are checked against): take over every partition."""
        self.epoch, self.fence, self.active = epoch, fence, True
        self._submit(self._take_over)

    def deactivate(self) -> None:
        self.active = False

    def close(self) -> None:
        self.active = False
        self._closed.set()
        self._events.shutdown(wait=True, cancel_futures=True)

    def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if not self.active:
            raise NotControllerError("this broker is not the controller")
        epoch = self.epoch
        try:
            return fn(*args)
        except ControllerMovedError:
            if self.epoch != epoch:  # won again meanwhile: only this event was stale
                raise NotControllerError("the controller epoch changed") from None
            self.active = False
            log.warning("controller epoch %d is over (another broker is controller): "
                        "stopping as controller", self.epoch)
            # Kafka's maybeResign: if /controller still names this broker (its epoch was
            # taken without it noticing), give it up so that an election runs
            self.zk.resign_controller(self.broker_id)
            raise NotControllerError("this broker is no longer the controller") from None

    def _submit(self, fn: Callable[..., None], *args: object) -> None:
        def run() -> None:
            try:
                self._run(fn, *args)
            except NotControllerError:
                pass
            except Exception:
                log.exception("controller event %s failed", getattr(fn, "__name__", fn))

        try:
            self._events.submit(run)
        except RuntimeError:  # shut down
            pass

    def call(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        """Run a request's work as a controller event; NotControllerError when this broker
        is not the controller."""
        if not self.active:
            raise NotControllerError("this broker is not the controller")
        return self._events.submit(self._run, fn, *args)

    def _tick_loop(self) -> None:
        while not self._closed.wait(_TICK_SECONDS):
            if self.active:
                self._submit(self._tick)

    # --- events --------------------------------------------------------------------------------

    def _take_over(self) -> None:
        self.live = set(self.zk.live_brokers())
        self.shutting_down &= self.live
        self.offline_replicas = {}
        self.offline = set()
        for broker in sorted(self.live):
            self._load_offline_replicas(broker)
        self._known_topics = set()
        self._reassigning = {}
        self._deleting = set()
        for topic in self.zk.topics():
            self._init_topic(topic)
            self._watch_topic(topic)
        if not self._watching:  # each watch delivers the requests already waiting
            self._watching = True
            self.zk.watch_brokers(lambda ids: self._submit(self._brokers_changed, set(ids)))
            self.zk.watch_topics(lambda names: self._submit(self._topics_changed, set(names)))
            self.zk.watch_topic_deletions(lambda names: self._submit(self._delete_topics,
                                                                     names))
            self.zk.watch_controlled_shutdowns(lambda names: self._submit(
                self._controlled_shutdown_requests, names))
            self.zk.watch_log_dir_events(lambda names: self._submit(self._log_dir_events,
                                                                    names))
        else:  # won again: requests made while this broker was not controller were dropped
            self._delete_topics(self.zk.topic_deletion_requests())
            self._controlled_shutdown_requests(self.zk.controlled_shutdown_requests())
            self._log_dir_events(self.zk.log_dir_events())
        log.info("controller (epoch %d) took over %d topics with brokers %s", self.epoch,
                 len(self._known_topics), sorted(self.live))

    def _watch_topic(self, topic: str) -> None:
        """Partitions added to a topic (its assignment znode changes) get their states."""
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def changed(assignment: TopicAssignment | None) -> bool:
            if assignment is None:
                self._watched_topics.discard(topic)
                return False
            self._submit(self._assignment_changed, topic)
            return True

        def configured(configs: dict[str, str] | None) -> bool:
            # unclean.leader.election.enable turned on elects offline partitions at once
            if configs is None or topic not in self._watched_topics:
                return False
            self._submit(self._assignment_changed, topic)
            return True

        self.zk.watch_topic_assignment(topic, changed)
        self.zk.watch_topic_configs(topic, configured)

    def _topics_changed(self, names: set[str]) -> None:
        for topic in sorted(names - self._known_topics - self._deleting):
            self._init_topic(topic)
            self._watch_topic(topic)
        self._known_topics &= names

    def _assignment_changed(self, topic: str) -> None:
        if topic in self._known_topics:
            self._init_topic(topic)

    def unclean_default_enabled(self) -> None:
        """The broker default unclean.leader.election.enable turned on (a dynamic config):
        offline partitions of the topics it now covers get a leader at once (Kafka's
        enableDefaultUncleanLeaderElection)."""
        self._submit(self._every_topic_changed)

    def _every_topic_changed(self) -> None:
        for topic in sorted(self._known_topics):
            self._init_topic(topic)

    def _init_topic(self, topic: str) -> None:
        """States for a topic's partitions that have none; the others are brought in line
        with the live brokers (a controller taking over after failures)."""
        assignment = self.zk.topic_assignment(topic)
        if assignment is None:
            return
        self._known_topics.add(topic)
        for index, replicas in sorted(assignment.partitions.items()):
            if reassignment.in_progress(replicas):
                self._reassigning.setdefault((topic, index),
                                             reassignment.target_replicas(replicas))
            found = self.zk.partition_state(topic, index)
            if found is None:
                state = initial_state(replicas.replicas, self.live, self.epoch)
                if self.zk.create_partition_state(topic, index, state, self.fence) is not None:
                    log.info("%s-%d: leader %d, ISR %s (new)", topic, index, state.leader,
                             list(state.isr))
                    continue
            online = self._live_for((topic, index))
            self._update(topic, index, lambda s, r=replicas.replicas, c=online: self._on_brokers(
                topic, s, r, c, set()))

    def _brokers_changed(self, live: set[int]) -> None:
        back = live - self.live
        for broker in self.live - live:
            self.offline_replicas.pop(broker, None)
        for broker in sorted(back):  # a new process: what its predecessor lost is over
            self._load_offline_replicas(broker)
        self.live = set(live)
        self.shutting_down &= live
        for topic, index, replicas in self._partitions():
            online = self._live_for((topic, index), live)
            self._update(topic, index, lambda s, t=topic, r=replicas, c=online: self._on_brokers(
                t, s, r, c, back & c))
        for topic in sorted(self._deleting):  # a replica gone need not answer any more
            self._try_delete(topic)

    def _on_brokers(self, topic: str, state: PartitionState, replicas: tuple[int, ...],
                    live: set[int], back: set[int]) -> PartitionState | None:
        new = on_brokers_lost(state, replicas, live, self.epoch, unclean=self.unclean(topic))
        if new is None:
            for broker in sorted(back):
                new = on_broker_back(state, replicas, broker, self.epoch)
                if new is not None:
                    break
        return new

    # --- offline replicas (failed log directories) ---------------------------------------------

    def _live_for(self, tp: TP, live: set[int] | None = None) -> set[int]:
        """The live brokers whose replica of ``tp`` is online (not in a failed log dir)."""
        found = self.live if live is None else live
        if not self.offline_replicas:
            return found
        return {b for b in found if tp not in self.offline_replicas.get(b, ())}

    def _load_offline_replicas(self, broker: int) -> set[TP]:
        offline = self.zk.offline_replicas(broker)
        if offline:
            self.offline_replicas[broker] = offline
        else:
            self.offline_replicas.pop(broker, None)
        return offline

    def _log_dir_events(self, names: list[str]) -> None:
        """Brokers whose log directories failed (Kafka's LogDirEventNotification): their
        replicas there leave the ISRs, and the partitions they led get other leaders."""
        if not names:
            return
        brokers = {b for name in names if (b := self.zk.log_dir_event_broker(name)) is not None}
        affected: set[TP] = set()
        for broker in sorted(brokers & self.live):
            offline = self._load_offline_replicas(broker)
            log.info("broker %d has %d replicas in failed log directories", broker,
                     len(offline))
            affected |= offline
        for topic, index, replicas in self._partitions():
            if (topic, index) in affected:
                online = self._live_for((topic, index))
                self._update(topic, index, lambda s, t=topic, r=replicas, c=online:
                             self._on_brokers(t, s, r, c, set()))
        self.zk.delete_log_dir_events(names, self.fence)

    def _partitions(self, topics: Iterable[str] | None = None
                    ) -> list[tuple[str, int, tuple[int, ...]]]:
        found = []
        for topic in sorted(self._known_topics if topics is None else topics):
            assignment = self.zk.topic_assignment(topic)
            if assignment is not None:
                found += [(topic, index, r.replicas)
                          for index, r in sorted(assignment.partitions.items())]
        return found

    def _update(self, topic: str, index: int,
                decide: Callable[[PartitionState], PartitionState | None]) -> PartitionState | None:
        """Write ``decide(current state)`` unless it is None; the state after (None when the
        partition has no state)."""
        started = time.monotonic()
        for _ in range(5):  # a leader's ISR write may race ours: read and decide again
            found = self.zk.partition_state(topic, index)
            if found is None:
                self.offline.discard((topic, index))
                return None
            state, version = found
            new = decide(state)
            if new is None:
                self._count_offline(topic, index, state)
                return state
            if self.zk.update_partition_state(topic, index, new, version,
                                              self.fence) is not None:
                lost = new.leader not in state.isr and new.leader >= 0
                self._count_offline(topic, index, new)
                if new.leader >= 0 and new.leader != state.leader:
                    self.elections.record((time.monotonic() - started) * 1000.0)
                    self.unclean_elections += lost
                log.log(logging.WARNING if new.leader < 0 or lost else logging.INFO,
                        "%s-%d: leader %d -> %d, ISR %s -> %s, leader epoch %d%s", topic, index,
                        state.leader, new.leader, list(state.isr), list(new.isr),
                        new.leader_epoch,
                        " (unclean election: records may be lost)" if lost else "")
                return new
        log.warning("%s-%d: gave up updating the partition state (it kept changing)",
                    topic, index)
        return None

    def _count_offline(self, topic: str, index: int, state: PartitionState) -> None:
        if state.leader < 0:
            self.offline.add((topic, index))
        else:
            self.offline.discard((topic, index))

    # --- topic deletion ------------------------------------------------------------------------

    def _delete_topics(self, names: list[str]) -> None:
        """Kafka's TopicDeletionManager: the topic's znodes go once every live replica has
        deleted its copy (the replica managers answer the request), so that the name is
        not free while a replica still holds the old records. A replica on a broker that is
        down deletes them when it comes back (the topic is gone, or has another id)."""
        for topic in names:
            self._known_topics.discard(topic)
            for tp in [tp for tp in self._reassigning if tp[0] == topic]:
                del self._reassigning[tp]
            if topic not in self._deleting:
                self._deleting.add(topic)
                self.zk.watch_topic_deletion_answers(topic, lambda t=topic: self._answered(t))
            self._try_delete(topic)

    def _answered(self, topic: str) -> bool:  # kazoo thread
        if topic not in self._deleting or not self.active:
            return False
        self._submit(self._try_delete, topic)
        return True

    def _try_delete(self, topic: str) -> None:
        if topic not in self._deleting:
            return
        assignment = self.zk.topic_assignment(topic)
        if assignment is not None:
            replicas = {r for a in assignment.partitions.values() for r in a.replicas}
            waiting = replicas & self.live
            if waiting:
                waiting -= self.zk.topic_deletion_answers(topic, assignment.topic_id)
            if waiting:
                log.info("topic %s: deletion waits for the replicas on brokers %s", topic,
                         sorted(waiting))
                return
        self._deleting.discard(topic)
        self.zk.delete_topic(topic, self.fence)
        log.info("deleted topic %s", topic)

    # --- controlled shutdown -------------------------------------------------------------------

    def _controlled_shutdown_requests(self, names: list[str]) -> None:
        for name in names:
            broker = self.zk.pending_controlled_shutdown(name)
            if broker is not None:
                self.zk.answer_controlled_shutdown(name, self.controlled_shutdown(broker),
                                                   self.fence)

    def controlled_shutdown(self, broker: int) -> list[TP]:
        """Move leaderships away from ``broker`` and take it out of the ISRs; the partitions
        it still leads (no other live in-sync replica). Partitions of one replica stay."""
        self.shutting_down.add(broker)
        candidates = self.live - self.shutting_down
        remaining = []
        for topic, index, replicas in self._partitions():
            if broker not in replicas or len(replicas) < 2:
                continue
            online = self._live_for((topic, index), candidates)
            after = self._update(topic, index, lambda s, r=replicas, c=online:
                                 on_controlled_shutdown(s, r, broker, c, self.epoch))
            # worth waiting for only if another live replica may still catch up
            if after is not None and after.leader == broker and any(
                    r in candidates for r in replicas if r != broker):
                remaining.append((topic, index))
        log.info("controlled shutdown of broker %d: %d partitions still led by it", broker,
                 len(remaining))
        return remaining

    # --- leader elections ----------------------------------------------------------------------

    def elect_leaders(self, election_type: int, partitions: list[TP] | None) -> dict[TP, Outcome]:
        """ElectLeaders: ``PREFERRED`` moves each partition to its first replica, ``UNCLEAN``
        gives an offline partition a leader from outside the ISR if need be."""
        replicas_of = {(t, i): r for t, i, r in self._partitions()}
        wanted = sorted(replicas_of) if partitions is None else partitions
        candidates = self.live - self.shutting_down
        results: dict[TP, Outcome] = {}
        for tp in wanted:
            replicas = replicas_of.get(tp)
            if replicas is None:
                results[tp] = (ErrorCode.unknown_topic_or_partition,
                               "The partition does not exist.")
                continue
            found = self.zk.partition_state(*tp)
            if found is None:
                results[tp] = (ErrorCode.unknown_topic_or_partition,
                               "The partition does not exist.")
                continue
            results[tp] = self._elect(tp, found[0], replicas, election_type,
                                      self._live_for(tp, candidates))
        return results

    def _elect(self, tp: TP, state: PartitionState, replicas: tuple[int, ...],
               election_type: int, candidates: set[int]) -> Outcome:
        if election_type == PREFERRED:
            if state.leader == replicas[0]:
                return ErrorCode.election_not_needed, NOT_NEEDED

            def decide(s: PartitionState) -> PartitionState | None:
                return preferred_leader(s, replicas, candidates, self.epoch)

            strategy = "PreferredReplicaPartitionLeaderElectionStrategy"
            failure = ErrorCode.preferred_leader_not_available
        else:
            if state.leader in candidates:
                return ErrorCode.election_not_needed, NOT_NEEDED

            def decide(s: PartitionState) -> PartitionState | None:
                return on_brokers_lost(s, replicas, candidates, self.epoch, unclean=True)

            strategy = "OfflinePartitionLeaderElectionStrategy"
            failure = ErrorCode.eligible_leaders_not_available
        after = self._update(*tp, decide)
        if after is None or after.leader == NO_LEADER or (
                election_type == PREFERRED and after.leader != replicas[0]):
            return failure, (f"Failed to elect leader for partition {tp[0]}-{tp[1]} under "
                             f"strategy {strategy}")
        return ErrorCode.none, None

    def _rebalance(self) -> None:
        """auto.leader.rebalance.enable: a broker that leads more than
        leader.imbalance.per.broker.percentage fewer of the partitions it prefers than it
        should gets them back (when it is alive and in sync)."""
        by_preferred: dict[int, list[tuple[TP, tuple[int, ...]]]] = {}
        for topic, index, replicas in self._partitions():
            if replicas and (topic, index) not in self._reassigning:
                by_preferred.setdefault(replicas[0], []).append(((topic, index), replicas))
        threshold = self.setting("leader.imbalance.per.broker.percentage") / 100
        candidates = self.live - self.shutting_down
        for broker, partitions in sorted(by_preferred.items()):
            if broker not in candidates:
                continue
            elsewhere = []
            for tp, replicas in partitions:
                found = self.zk.partition_state(*tp)
                if found is not None and found[0].leader != broker:
                    elsewhere.append((tp, replicas))
            if not elsewhere or len(elsewhere) / len(partitions) <= threshold:
                continue
            log.info("broker %d leads %d of its %d preferred partitions: preferred leader "
                     "election", broker, len(partitions) - len(elsewhere), len(partitions))
            for tp, replicas in elsewhere:
                online = self._live_for(tp, candidates)
                self._update(*tp, lambda s, r=replicas, c=online: preferred_leader(
                    s, r, c, self.epoch))

    # --- reassignments -------------------------------------------------------------------------

    def alter_reassignments(self, targets: dict[TP, tuple[int, ...] | None]) -> dict[TP, Outcome]:
        """AlterPartitionReassignments: start moving partitions to their target replicas
        (None: cancel a running move)."""
        results: dict[TP, Outcome] = {}
        by_topic: dict[str, dict[int, tuple[int, ...] | None]] = {}
        for (topic, index), target in targets.items():
            by_topic.setdefault(topic, {})[index] = target
        for topic, wanted in sorted(by_topic.items()):
            results.update(self._reassign_topic(topic, wanted))
        return results

    def _reassign_topic(self, topic: str, wanted: dict[int, tuple[int, ...] | None]
                        ) -> dict[TP, Outcome]:
        results: dict[TP, Outcome] = {}
        for _ in range(5):
            found = self.zk.topic_assignment_versioned(topic)
            if found is None:
                return {(topic, i): (ErrorCode.unknown_topic_or_partition,
                                     "The partition does not exist.") for i in wanted}
            assignment, version = found
            partitions = dict(assignment.partitions)
            moves: dict[int, tuple[int, ...]] = {}
            for index, target in sorted(wanted.items()):
                current = partitions.get(index)
                if current is None:
                    results[(topic, index)] = (ErrorCode.unknown_topic_or_partition,
                                               "The partition does not exist.")
                    continue
                if target is None:
                    if not reassignment.in_progress(current):
                        results[(topic, index)] = (ErrorCode.no_reassignment_in_progress,
                                                   "No reassignment is in progress for topic "
                                                   f"{topic} partition {index}")
                        continue
                    target = reassignment.original_replicas(current)
                problem = check_target(target, self.live)
                if problem is not None:
                    results[(topic, index)] = (ErrorCode.invalid_replica_assignment, problem)
                    continue
                partitions[index] = reassignment.start(current, target)
                moves[index] = target
                results[(topic, index)] = (ErrorCode.none, None)
            if not moves:
                return results
            new = TopicAssignment(partitions, assignment.topic_id)
            if self.zk.set_topic_assignment(topic, new, version, self.fence) is not None:
                break
        else:
            return {(topic, i): (ErrorCode.request_timed_out,
                                 "The topic's assignment kept changing.") for i in wanted}
        for index, target in moves.items():
            tp = (topic, index)
            log.info("%s-%d: reassigning to %s (replicas now %s)", topic, index, list(target),
                     list(partitions[index].replicas))
            if reassignment.in_progress(partitions[index]):
                self._reassigning[tp] = target
                # a new leader epoch: every replica applies the new replica set
                self._update(topic, index, lambda s: PartitionState(
                    s.leader, s.leader_epoch + 1, s.isr, self.epoch))
            else:
                self._reassigning.pop(tp, None)
                self._finish_reassignment(tp, target, force=True)
        return results

    def _tick(self) -> None:
        for tp, target in sorted(self._reassigning.items()):
            found = self.zk.partition_state(*tp)
            if found is None:
                self._reassigning.pop(tp, None)
            elif reassignment.caught_up(found[0], target):
                self._finish_reassignment(tp, target)
        if not self.setting("auto.leader.rebalance.enable"):
            return
        self._since_rebalance += _TICK_SECONDS
        if self._since_rebalance >= self.setting("leader.imbalance.check.interval.seconds"):
            self._since_rebalance = 0.0
            self._rebalance()

    def _finish_reassignment(self, tp: TP, target: tuple[int, ...], force: bool = False) -> None:
        """Every target replica is in sync (or the move was cancelled, ``force``): a leader
        among them, the others out of the ISR, then the assignment without them."""
        topic, index = tp
        candidates = self.live - self.shutting_down
        after = self._update(topic, index, lambda s: None if set(s.isr) <= set(target) and (
            s.leader in target) else reassignment.finish(s, target, candidates, self.epoch))
        if after is None or (after.leader not in target and not force):
            return  # no target replica can lead yet: try again at the next tick
        for _ in range(5):
            found = self.zk.topic_assignment_versioned(topic)
            if found is None:
                break
            assignment, version = found
            partitions = dict(assignment.partitions)
            partitions[index] = ReplicaAssignment(tuple(target))
            if self.zk.set_topic_assignment(topic, TopicAssignment(
                    partitions, assignment.topic_id), version, self.fence) is not None:
                log.info("%s-%d: reassignment to %s done", topic, index, list(target))
                break
        self._reassigning.pop(tp, None)

    def list_reassignments(self, partitions: list[TP] | None
                           ) -> dict[TP, ReplicaAssignment]:
        """ListPartitionReassignments: the partitions being moved (of those asked for)."""
        topics = self._known_topics if partitions is None else {t for t, _ in partitions}
        found = {}
        for topic in sorted(topics):
            assignment = self.zk.topic_assignment(topic)
            if assignment is None:
                continue
            for index, a in assignment.partitions.items():
                if reassignment.in_progress(a) and (
                        partitions is None or (topic, index) in partitions):
                    found[(topic, index)] = a
        return found
