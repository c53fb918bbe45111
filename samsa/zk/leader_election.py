"""The controller's leader and ISR decisions, as Kafka's ZooKeeper-mode controller makes them
(PartitionStateMachine and its election strategies): pure functions from what the controller
knows (a partition's replicas in assignment order, its last state, the live brokers) to the
state it writes to ``/brokers/topics/<t>/partitions/<p>/state``.

* A new partition: the first live replica leads; the ISR is the live replicas; epoch 0.
* Brokers lost: they leave the ISR; a lost leader is replaced by the first replica (in
  assignment order) that is alive and in the ISR. With none, the partition goes offline
  (leader -1, the ISR kept as it was, so that one of its members can lead again when it comes
  back) unless ``unclean.leader.election.enable`` lets the first live replica lead (records
  the ISR had and it lacks are lost: the caller reports it). Any change bumps the leader epoch.
* A broker back: an offline partition whose ISR holds it gets it as leader.
* Preferred leader: the first replica leads again when it is alive and in the ISR.
* Controlled shutdown of a broker: the partitions it leads move to another live in-sync
  replica (those with none stay: the caller reports them); it leaves the ISR of the others.

Every function returns the new state, or None when nothing changes.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from samsa.zk.zk_data import NO_LEADER, PartitionState


def initial_state(replicas: Sequence[int], live: Collection[int],
                  controller_epoch: int) -> PartitionState:
    """The first state of a new partition (offline when no replica is alive)."""
    isr = tuple(r for r in replicas if r in live)
    return PartitionState(isr[0] if isr else NO_LEADER, 0, isr, controller_epoch)


def _changed(state: PartitionState, leader: int, isr: tuple[int, ...],
             controller_epoch: int) -> PartitionState | None:
    if leader == state.leader and isr == state.isr:
        return None
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)


def on_brokers_lost(state: PartitionState, replicas: Sequence[int], live: Collection[int],
                    controller_epoch: int, *, unclean: bool = False) -> PartitionState | None:
    """The partition's state after brokers outside ``live`` died."""
    isr = tuple(r for r in state.isr if r in live)
    if state.leader in live:
        return _changed(state, state.leader, isr, controller_epoch)
    for replica in replicas:
        if replica in isr:
            return _changed(state, replica, isr, controller_epoch)
    if unclean:
        for replica in replicas:
            if replica in live:
                return _changed(state, replica, (replica,), controller_epoch)
    if state.leader == NO_LEADER:
        return None  # already offline: keep the last ISR for its members to come back to
    return PartitionState(NO_LEADER, state.leader_epoch + 1, state.isr, controller_epoch)


def on_broker_back(state: PartitionState, replicas: Sequence[int], broker: int,
                   controller_epoch: int) -> PartitionState | None:
    """A broker registered again: an offline partition it was in sync for is led by it."""
    if state.leader != NO_LEADER or broker not in state.isr or broker not in replicas:
        return None
    return PartitionState(broker, state.leader_epoch + 1, state.isr, controller_epoch)


def preferred_leader(state: PartitionState, replicas: Sequence[int], live: Collection[int],
                     controller_epoch: int) -> PartitionState | None:
    """Move leadership back to the first replica when it is alive and in sync."""
    if not replicas:
        return None
    preferred = replicas[0]
    if state.leader == preferred or preferred not in live or preferred not in state.isr:
        return None
    return PartitionState(preferred, state.leader_epoch + 1, state.isr, controller_epoch)


def isr_change(state: PartitionState, isr: Collection[int]) -> PartitionState | None:
    """A leader's own ISR shrink or expand: same leader and epoch (Kafka's leaders write it
    with the znode version they read), the controller epoch it was written under kept."""
    new = tuple(sorted(set(isr), key=lambda r: (r != state.leader, r)))
    if set(new) == set(state.isr):
        return None
    return PartitionState(state.leader, state.leader_epoch, new, state.controller_epoch)


def on_controlled_shutdown(state: PartitionState, replicas: Sequence[int], broker: int,
                           live: Collection[int], controller_epoch: int) -> PartitionState | None:
    """``broker`` is shutting down (``live`` no longer counts it)."""
    isr = tuple(r for r in state.isr if r != broker)
    if state.leader == broker:
        for replica in replicas:
            if replica in isr and replica in live:
                return PartitionState(replica, state.leader_epoch + 1, isr, controller_epoch)
        return None
    if broker in state.isr and isr:
        return PartitionState(state.leader, state.leader_epoch + 1, isr, controller_epoch)
    return None
