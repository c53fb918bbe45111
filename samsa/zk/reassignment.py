"""Partition reassignment as Kafka's controller runs it (KIP-455), as pure functions.

A partition with original replicas ORS moving to target replicas TRS first gets all of them
(RS = TRS then the rest of ORS), with ``adding_replicas`` = TRS - ORS and ``removing_replicas``
= ORS - TRS in its topic znode. The new replicas fetch from the leader; once every target
replica is in the ISR the controller finishes: a leader from TRS (the current one if it stays),
the ISR without the removed replicas, then RS = TRS in the assignment. Cancelling goes back to
ORS the same way, at once.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from samsa.zk.zk_data import PartitionState, ReplicaAssignment


def original_replicas(a: ReplicaAssignment) -> tuple[int, ...]:
    return tuple(r for r in a.replicas if r not in a.adding_replicas)


def target_replicas(a: ReplicaAssignment) -> tuple[int, ...]:
    return tuple(r for r in a.replicas if r not in a.removing_replicas)


def in_progress(a: ReplicaAssignment) -> bool:
    return bool(a.adding_replicas or a.removing_replicas)


def start(current: ReplicaAssignment, target: Sequence[int]) -> ReplicaAssignment:
    """The assignment while moving to ``target`` (just ``target`` when it is the original:
    nothing to move, or a cancellation)."""
    original = original_replicas(current)
    target = tuple(target)
    if target == original:
        return ReplicaAssignment(original)
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    return ReplicaAssignment(tuple(dict.fromkeys(target + original)), adding, removing)


def caught_up(state: PartitionState, target: Sequence[int]) -> bool:
    return all(r in state.isr for r in target)


def finish(state: PartitionState, target: Sequence[int], live: Collection[int],
           controller_epoch: int) -> PartitionState | None:
    """The state that ends a move to ``target``: the leader kept if it is a live target
    replica, else the first live in-sync target replica; the ISR cut to ``target``. None
    when no target replica can lead."""
    isr = tuple(r for r in state.isr if r in target)
    if state.leader in target and state.leader in live:
        leader = state.leader
    else:
        leader = next((r for r in target if r in isr and r in live), -1)
        if leader < 0:
            return None
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)
