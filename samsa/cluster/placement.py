"""Replica placement for new topics and partitions: Kafka's ``AdminUtils.assignReplicasToBrokers``.

This is the algorithm a ZooKeeper-mode Kafka (2.x/3.x: ``kafka.admin.AdminUtils``, now
``org.apache.kafka.admin.AdminUtils``) uses when CreateTopics or CreatePartitions gives no
manual assignment. It is pure: no I/O, and the only randomness is the ``rng`` it is given.

Its goals (from Kafka's Javadoc):

1. spread the replicas evenly among the brokers;
2. for the partitions whose leader is a given broker, spread their other replicas over the
   other brokers;
3. when every broker has a rack, put the replicas of each partition on different racks when
   possible.

Rack-unaware (no broker has a rack): the first replica (the preferred leader) of each
partition goes round-robin over the broker list from a start index; the other replicas follow
it at an increasing shift (``replica_index``), and the shift grows by one each time the
partition id wraps around the broker list, so that the same sequences do not repeat. With 5
brokers, 10 partitions, replication factor 3 and start index 0::

    broker-0  broker-1  broker-2  broker-3  broker-4
    p0        p1        p2        p3        p4        (1st replica)
    p5        p6        p7        p8        p9        (1st replica)
    p4        p0        p1        p2        p3        (2nd replica)
    p8        p9        p5        p6        p7        (2nd replica)
    p3        p4        p0        p1        p2        (3rd replica)
    p7        p8        p9        p5        p6        (3rd replica)

Rack-aware (every broker has a rack): the same round-robin, on the rack-alternated broker list
(``rack_alternated_broker_list``: one broker of each rack in turn, racks in sorted order). The
followers walk that list with the shift multiplied by the number of racks, skipping a broker
when its rack already holds a replica of the partition while some rack holds none, or when it
already holds a replica while some broker holds none. So a partition spans
``min(replication factor, racks)`` racks.

Kafka checks, in this order: partitions > 0 (InvalidPartitionsException), replication factor
> 0 and not larger than the number of brokers (InvalidReplicationFactorException), and, when
some broker has a rack, that all have one (AdminOperationException). The messages here are
Kafka's. The broker list is taken in the order given, as Kafka does (this matters only
without racks). ``AdminZkClient.getBrokerMetadatas`` (CreatePartitions, the topic tools) sorts
it by broker id; CreateTopics (``ZkAdminManager``) takes the metadata cache's alive brokers in
its map's order, so sorted by id is the order to use.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from samsa.errors import ErrorCode, KafkaError

__all__ = [
    "AdminOperationError",
    "BrokerMetadata",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "assign_replicas",
    "rack_alternated_broker_list",
    "replica_index",
]

_RAND = random.Random()  # Kafka's AdminUtils.RAND: one generator for every call without an rng


class InvalidPartitionsError(KafkaError):
    """Kafka's InvalidPartitionsException: a partition count that is not positive."""

    code = ErrorCode.invalid_partitions


class InvalidReplicationFactorError(KafkaError):
    """Kafka's InvalidReplicationFactorException: not positive, or more than the brokers."""

    code = ErrorCode.invalid_replication_factor


class AdminOperationError(KafkaError):
    """Kafka's AdminOperationException (some brokers with a rack, some without).

    It is not one of Kafka's ApiExceptions, so a broker answers it as UNKNOWN_SERVER_ERROR.
    """

    code = ErrorCode.unknown_server_error


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """Kafka's BrokerMetadata: a broker id and its rack (``broker.rack``), None when unset."""

    id: int
    rack: str | None = None


def assign_replicas(
    brokers: Mapping[int, str | None] | Iterable[BrokerMetadata],
    partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's ``AdminUtils.assignReplicasToBrokers``: partition id -> replica broker ids.

    ``brokers`` is a mapping broker id -> rack (None for no rack) or BrokerMetadata, in the
    order Kafka would get them (sorted by id). The assignment is rack-aware when the brokers
    have racks (Kafka's default, RackAwareMode.Enforced), and every broker must then have one.
    The first replica of each list is the preferred leader.

    ``fixed_start_index`` >= 0 fixes both the index of the first partition's leader in the
    broker list and the initial follower shift; otherwise each is drawn from ``rng`` (start
    index first, then shift, each ``rng.randrange(number of brokers)``, as Kafka's
    ``RAND.nextInt``). ``start_partition_id`` is the first partition id to assign (negative
    means 0). When partitions are added, Kafka (AdminZkClient.addPartitions) passes the current
    partition count as start partition id and, as fixed start index, the index in the broker
    list of partition 0's leader (the first broker with an id >= it). The shift is not replayed
    for the partitions before the start: it starts at the start index (or its draw) and grows by
    one at each assigned partition id, the start included, that is a positive multiple of the
    number of brokers.

    Raises InvalidPartitionsError, InvalidReplicationFactorError or AdminOperationError with
    Kafka's messages, and ValueError when a broker id appears twice.
    """
    metadata = _broker_metadata(brokers)
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(metadata):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(metadata)}."
        )
    rng = _RAND if rng is None else rng
    if all(b.rack is None for b in metadata):
        return _assign_rack_unaware(partitions, replication_factor, [b.id for b in metadata],
                                    fixed_start_index, start_partition_id, rng)
    if any(b.rack is None for b in metadata):
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    racks = {b.id: b.rack for b in metadata if b.rack is not None}
    return _assign_rack_aware(partitions, replication_factor, racks, fixed_start_index,
                              start_partition_id, rng)


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Kafka's ``getRackAlternatedBrokerList``: the brokers, one of each rack in turn.

    Racks are taken in sorted order (Java's String order: UTF-16 code units), and the brokers
    of a rack in id order; a rack that runs out is skipped. For racks
    ``rack1: 0, 1, 2``, ``rack2: 3, 4, 5``, ``rack3: 6, 7, 8`` this is
    ``[0, 3, 6, 1, 4, 7, 2, 5, 8]``.
    """
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack, key=_java_string_key)]
    result: list[int] = []
    depth = 0
    while len(result) < len(broker_racks):
        result.extend(queue[depth] for queue in queues if depth < len(queue))
        depth += 1
    return result


def replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int,
                  n_brokers: int) -> int:
    """Kafka's ``replicaIndex``: where follower number ``replica_index`` (0 for the second
    replica) goes in a list of ``n_brokers``, never on ``first_replica_index`` itself."""
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def _assign_rack_unaware(partitions: int, replication_factor: int, broker_list: list[int],
                         fixed_start_index: int, start_partition_id: int,
                         rng: random.Random) -> dict[int, list[int]]:
    n = len(broker_list)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    current = max(0, start_partition_id)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    assignment: dict[int, list[int]] = {}
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        replicas = [broker_list[first]]
        replicas.extend(broker_list[replica_index(first, shift, j, n)]
                        for j in range(replication_factor - 1))
        assignment[current] = replicas
        current += 1
    return assignment


def _assign_rack_aware(partitions: int, replication_factor: int, broker_racks: dict[int, str],
                       fixed_start_index: int, start_partition_id: int,
                       rng: random.Random) -> dict[int, list[int]]:
    num_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    current = max(0, start_partition_id)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    assignment: dict[int, list[int]] = {}
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {broker_racks[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[replica_index(first, shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # Skip the broker if its rack has a replica while some rack has none, or if it
                # has a replica itself while some broker has none.
                if ((rack not in racks_with_replicas or len(racks_with_replicas) == num_racks)
                        and (broker not in brokers_with_replicas
                             or len(brokers_with_replicas) == n)):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        assignment[current] = replicas
        current += 1
    return assignment


def _broker_metadata(
    brokers: Mapping[int, str | None] | Iterable[BrokerMetadata],
) -> list[BrokerMetadata]:
    if isinstance(brokers, Mapping):
        metadata = [BrokerMetadata(broker_id, rack) for broker_id, rack in brokers.items()]
    else:
        metadata = list(brokers)
    seen: set[int] = set()
    for b in metadata:
        if b.id in seen:
            raise ValueError(f"Broker {b.id} is listed more than once.")
        seen.add(b.id)
    return metadata


def _java_string_key(s: str) -> bytes:
    """Orders strings as Java's String.compareTo does (by UTF-16 code unit)."""
    return s.encode("utf-16-be", "surrogatepass")


def check_target(target: Sequence[int], registered: Collection[int]) -> str | None:
    """Kafka's checks of a requested replica list; the INVALID_REPLICA_ASSIGNMENT message or
    None."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return ("Duplicate replica ids in partition reassignment replica list: "
                f"[{', '.join(map(str, target))}]")
    unknown = [r for r in target if r not in registered]
    if unknown:
        return (f"Replica assignment has brokers that are not alive. Replica list: "
                f"[{', '.join(map(str, target))}], live broker list: "
                f"[{', '.join(map(str, sorted(registered)))}]")
    return None
