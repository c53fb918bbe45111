"""Every difference the differential scenarios find between Apache Kafka and samsa that samsa
means (docs/compatibility.md lists them); any other difference fails the scenario's test.

Keys are (scenario, step); ``fields`` are the paths of the diff (normalize.diff) a difference
explains, each with everything below it. A step's other fields must still agree, and each
deliberate field must still differ, so the lists stay true.
"""

from __future__ import annotations

from typing import NamedTuple


class Difference(NamedTuple):
    reason: str
    fields: tuple[str, ...]


def covers(field: str, path: str) -> bool:
    """Whether a difference at ``field`` explains a diff at ``path``."""
    return path == field or path.startswith((f"{field}.", f"{field}["))


_CONFIGS = "topics[name={}].configs"
_TIERED = ("local.retention.bytes", "local.retention.ms", "remote.copy.lag.bytes",
           "remote.copy.lag.ms", "remote.log.copy.disable", "remote.log.delete.on.disable",
           "remote.storage.enable")


def _created_topic_configs(topic: str) -> Difference:
    configs = _CONFIGS.format(topic)
    return Difference(
        "CreateTopics lists a new topic's configs: samsa has no tiered storage, so none of "
        "its topic configs (remote.*, local.retention.*); and Kafka's min.insync.replicas comes "
        "from a cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG) that KRaft's "
        "storage format writes with eligible leader replicas (KIP-966), where samsa's is the "
        "static default (DEFAULT_CONFIG).",
        (*(f"{configs}[name={c}]" for c in _TIERED),
         f"{configs}[name=min.insync.replicas].config_source"))


def _partition(topic: str, key: str = "index", partition: int = 0,
               responses: str = "responses", partitions: str = "partition_responses",
               topic_key: str = "name") -> str:
    return f"{responses}[{topic_key}={topic}].{partitions}[{key}={partition}]"



DELIBERATE: dict[tuple[str, str], Difference] = {
    ("idempotent_produce", "first batch at sequence 5"): Difference(
        "samsa refuses (OUT_OF_ORDER_SEQUENCE_NUMBER) an idempotent producer's first batch at "
        "a sequence other than 0 when the partition's log starts at offset 0, is not compacted "
        "and has had no producer expire, where Kafka accepts an unknown producer at any "
        "sequence: Kafka's leniency lets librdkafka count a batch delivered that no broker has "
        "(its 'implicit ack' when a batch refused as NOT_LEADER is followed by one accepted "
        "by the same leader).",
        (f"{_partition('idempotent-unknown-producer')}.error_code",
         f"{_partition('idempotent-unknown-producer')}.base_offset")),
    ("admin", "create"): _created_topic_configs("admin"),
    ("admin", "create: validate_only"): _created_topic_configs("admin-validate"),
    ("admin", "create: broker defaults (-1, -1)"): _created_topic_configs("admin-defaults"),
    ("transactions", "init: while a transaction is open"): Difference(
        "InitProducerId for a transactional id whose transaction is open: Kafka starts the "
        "abort and answers CONCURRENT_TRANSACTIONS until its markers are written (the producer "
        "retries); samsa writes the abort before it answers, with the epoch Kafka's last "
        "retry gets (the next step compares that answer).",
        ("error_code", "producer_id", "producer_epoch")),
    ("consumer_groups", "join"): Difference(
        "The first member of a new consumer group: Kafka 4.4 answers member epoch 2 (its target "
        "assignment is computed apart from the heartbeat; the group can be Assigning, its "
        "epoch ahead of the assignment's); samsa computes the assignment in the heartbeat, as "
        "Kafka 4.0 does, and answers epoch 1. Clients use the epoch they are given.",
        ("member_epoch",)),
}
