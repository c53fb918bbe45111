"""Every difference the differential scenarios find between Apache Kafka and samsa, written
down: ``DELIBERATE`` (samsa means it; docs/compatibility.md lists them) and ``BUGS`` (to be
fixed; test_against_kafka.py marks each an expected failure, strictly, so that a fix shows).

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


def _created_topic_config_bugs(topic: str) -> Difference:
    configs = _CONFIGS.format(topic)
    return Difference(
        "CreateTopics' configs of a new topic: samsa lists message.format.version (3.0-IV1), "
        "which Kafka 4 removed, and lacks four Kafka 4.4 topic configs: preallocate (false), "
        "segment.jitter.ms (0), max.decompressed.message.bytes (2147483639), "
        "errors.deadletterqueue.group.enable (false).",
        tuple(f"{configs}[name={c}]" for c in (
            "message.format.version", "preallocate", "segment.jitter.ms",
            "max.decompressed.message.bytes", "errors.deadletterqueue.group.enable")))


def _partition(topic: str, key: str = "index", partition: int = 0,
               responses: str = "responses", partitions: str = "partition_responses",
               topic_key: str = "name") -> str:
    return f"{responses}[{topic_key}={topic}].{partitions}[{key}={partition}]"


_FETCH_PARTITION = "responses[topic={}].partitions[partition_index={}]"

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

_OUT_OF_RANGE = Difference(
    "Fetch answering OFFSET_OUT_OF_RANGE: Kafka sends high_watermark, last_stable_offset and "
    "log_start_offset -1; samsa sends the partition's real values.",
    tuple(f"{_FETCH_PARTITION}.{f}" for f in (
        "high_watermark", "last_stable_offset", "log_start_offset")))


def _out_of_range(topic: str) -> Difference:
    return Difference(_OUT_OF_RANGE.reason,
                      tuple(f.format(topic, 0) for f in _OUT_OF_RANGE.fields))


def _aborted_transactions(path: str) -> Difference:
    return Difference(
        "Fetch's partition errors (unknown topic, partition or topic id): Kafka sends "
        "aborted_transactions as an empty array, samsa as null.",
        (f"{path}.aborted_transactions",))


def _produce_error_log_start(topic: str) -> Difference:
    return Difference(
        "Produce refused as CORRUPT_MESSAGE or MESSAGE_TOO_LARGE: Kafka answers "
        "log_start_offset -1 (as for every error but a record's INVALID_TIMESTAMP or "
        "INVALID_RECORD); samsa answers the partition's log start offset.",
        (f"{_partition(topic)}.log_start_offset",))


BUGS: dict[tuple[str, str], Difference] = {
    ("produce", "corrupt crc"): _produce_error_log_start("produce"),
    ("produce", "batch above max.message.bytes"): _produce_error_log_start("produce-small"),
    ("idempotent_produce", "duplicate batch"): Difference(
        "Produce of a duplicate idempotent batch: Kafka answers log_append_time = the "
        "original batch's max timestamp (its cached batch metadata, even on a CreateTime "
        "topic); samsa answers -1.",
        (f"{_partition('idempotent')}.log_append_time",)),
    ("fetch", "past the end"): _out_of_range("fetch"),
    ("fetch", "negative offset"): _out_of_range("fetch"),
    ("admin", "fetch below the log start"): _out_of_range("admin"),
    ("fetch", "unknown topic name"): _aborted_transactions(
        _FETCH_PARTITION.format("fetch-missing", 0)),
    ("fetch", "unknown partition"): _aborted_transactions(_FETCH_PARTITION.format("fetch", 7)),
    ("fetch", "unknown topic id"): _aborted_transactions(
        "responses[0].partitions[partition_index=0]"),
    ("list_offsets", "empty: latest"): Difference(
        "ListOffsets LATEST on an empty partition: Kafka answers the leader epoch (0: its "
        "leader epoch cache has the epoch from when the replica became leader); samsa -1.",
        ("topics[name=list-offsets-empty].partitions[partition_index=0].leader_epoch",)),
    ("admin", "create"): _created_topic_config_bugs("admin"),
    ("admin", "create: validate_only"): Difference(
        _created_topic_config_bugs("admin-validate").reason + " And with validate_only Kafka "
        "answers a topic id (of a topic it does not create), samsa none.",
        (*_created_topic_config_bugs("admin-validate").fields,
         "topics[name=admin-validate].topic_id")),
    ("admin", "create: broker defaults (-1, -1)"): _created_topic_config_bugs("admin-defaults"),
    ("groups", "produce to __consumer_offsets"): Difference(
        "Produce to an internal topic (__consumer_offsets, __transaction_state) from a client: "
        "Kafka refuses it as INVALID_TOPIC_EXCEPTION before anything else (only its own admin "
        "client may); samsa takes the batch like any other (here a corrupt one, refused as "
        "CORRUPT_MESSAGE; a valid one is appended to the group coordinator's log).",
        (f"{_partition('__consumer_offsets')}.error_code",
         f"{_partition('__consumer_offsets')}.log_start_offset")),
    ("transactions", "describe transactions: unknown id"): Difference(
        "DescribeTransactions of an unknown transactional id (TRANSACTIONAL_ID_NOT_FOUND): "
        "Kafka leaves transaction_start_time, producer_id and producer_epoch 0; samsa sends "
        "-1 (kio cannot even decode a negative timestamp).",
        ("transaction_states", "undecodable")),
    ("consumer_groups", "describe: a member's subscribed_topic_regex without a regex"):
        Difference(
            "ConsumerGroupDescribe of a member that subscribed by names: Kafka answers "
            "subscribed_topic_regex '' (empty), samsa null.", ("<value>",)),
}
