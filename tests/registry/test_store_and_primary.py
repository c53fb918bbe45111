"""The state lives in the _schemas topic: a restarted instance rebuilds it, a registry reads
records in Confluent's format, and two instances elect one primary that takes every write."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from waiting import wait_for

from samsa.embedded import Broker
from samsa.registry import SchemaRegistry
from samsa.registry.errors import RegistryError

from .helpers import Http, record, start_registry

V1 = record("R", ("a", "int"))
V2 = record("R", ("a", "int"), ("b", "string", "x"))

SNAPSHOT_PATHS = [
    "/subjects", "/subjects?deleted=true", "/subjects/s/versions", "/subjects/s/versions/1",
    "/subjects/s/versions/latest", "/subjects/t/versions?deleted=true", "/schemas/ids/1",
    "/schemas/ids/2", "/schemas/ids/3", "/config", "/config/s", "/mode", "/mode/j",
    "/schemas/ids/1/versions?deleted=true", "/subjects/j/versions/1",
]


def _snapshot(http: Http) -> dict[str, object]:
    return {p: (a.status, a.body) for p in SNAPSHOT_PATHS for a in [http.get(p)]}


def test_a_restarted_instance_rebuilds_the_same_state(samsa_broker: Broker) -> None:
    first = start_registry(samsa_broker)
    try:
        http = Http(first.url)
        http.register("s", V1)
        http.register("s", V2)
        http.register("t", V1)
        http.delete("/subjects/t")
        http.register("u", V2)
        http.delete("/subjects/u")
        http.delete("/subjects/u?permanent=true")
        http.register("j", {"type": "string"}, "JSON")
        http.put("/config", {"compatibility": "FULL"})
        http.put("/config/s", {"compatibility": "NONE"})
        http.put("/mode/j", {"mode": "READONLY"})
        before = _snapshot(http)
    finally:
        first.stop()
    second = start_registry(samsa_broker)
    try:
        http = Http(second.url)
        assert _snapshot(http) == before
        # ids go on from the topic's highest
        assert http.register("v", record("Q", ("q", "long"))).body == {"id": 4}
    finally:
        second.stop()


def test_reads_a_topic_written_in_confluents_format(samsa_broker: Broker) -> None:
    """Records as Confluent's registry writes them (keys with magic, AVRO without schemaType,
    DELETE_SUBJECT, NOOP)."""
    schema = json.dumps(V1)
    entries = [
        ({"keytype": "NOOP", "magic": 0}, None),
        ({"keytype": "SCHEMA", "subject": "a", "version": 1, "magic": 1},
         {"subject": "a", "version": 1, "id": 7, "schema": schema, "deleted": False}),
        ({"keytype": "SCHEMA", "subject": "b", "version": 1, "magic": 1},
         {"subject": "b", "version": 1, "id": 8, "schemaType": "JSON",
          "schema": '{"type":"string"}', "deleted": False}),
        ({"keytype": "DELETE_SUBJECT", "subject": "b", "magic": 0},
         {"subject": "b", "version": 1}),
        ({"keytype": "CONFIG", "subject": None, "magic": 0}, {"compatibilityLevel": "FORWARD"}),
        ({"keytype": "CONFIG", "subject": "a", "magic": 0}, {"compatibilityLevel": "NONE"}),
        ({"keytype": "MODE", "subject": "a", "magic": 0}, {"mode": "READONLY"}),
        ({"keytype": "MODE", "subject": "a", "magic": 0}, None),  # a tombstone
    ]
    producer = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers})
    for key, value in entries:
        producer.produce("_schemas", key=json.dumps(key).encode(),
                         value=None if value is None else json.dumps(value).encode())
    assert producer.flush(30) == 0
    registry = start_registry(samsa_broker)
    try:
        http = Http(registry.url)
        assert http.get("/subjects").body == ["a"]
        assert http.get("/subjects?deleted=true").body == ["a", "b"]
        assert http.get("/schemas/ids/7").body == {"schema": schema}
        assert http.get("/schemas/ids/8").body["schemaType"] == "JSON"
        assert http.get("/config").body == {"compatibilityLevel": "FORWARD"}
        assert http.get("/config/a").body == {"compatibilityLevel": "NONE"}
        assert http.get("/mode/a").error_code == 40409
        assert http.register("c", V2).body == {"id": 9}
    finally:
        registry.stop()


def test_the_schemas_topic_is_compacted_with_one_partition(registry: SchemaRegistry,
                                                            samsa_broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap_servers})
    topic = admin.list_topics("_schemas", timeout=10).topics["_schemas"]
    assert len(topic.partitions) == 1
    resource = ConfigResource(ConfigResource.Type.TOPIC, "_schemas")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"


def test_two_instances_one_primary_writes_forwarded(samsa_broker: Broker) -> None:
    a = start_registry(samsa_broker)
    b = start_registry(samsa_broker)
    try:
        wait_for(lambda: a.is_primary != b.is_primary, what="exactly one primary")
        primary, secondary = (a, b) if a.is_primary else (b, a)
        assert secondary.wait_for_primary(10) == primary.url
        # a write at the secondary is forwarded; both answer it at once afterwards
        assert Http(secondary.url).register("s", V1).body == {"id": 1}
        for instance in (primary, secondary):
            assert Http(instance.url).get("/subjects/s/versions").body == [1]
        assert Http(primary.url).register("s", V2).body == {"id": 2}
        wait_for(lambda: Http(secondary.url).get("/subjects/s/versions").body == [1, 2],
                 what="the secondary reading the primary's write")
        # errors come back from the primary as they are
        refused = Http(secondary.url).register("s", record("R", ("a", "string")))
        assert (refused.status, refused.error_code) == (409, 409)
        assert Http(secondary.url).put("/config/s", {"compatibility": "NONE"}).status == 200
        assert Http(primary.url).get("/config/s").body == {"compatibilityLevel": "NONE"}

        # the primary leaves: the other instance takes over the writes
        primary.stop()
        wait_for(lambda: secondary.is_primary, timeout=60, what="a new primary")
        assert Http(secondary.url).register("s", record("R", ("a", "string"))).body == {
            "id": 3}
    finally:
        a.stop()
        b.stop()


def test_an_ineligible_instance_only_forwards(samsa_broker: Broker) -> None:
    primary = start_registry(samsa_broker)
    follower = start_registry(samsa_broker, **{"leader.eligibility": "false"})
    try:
        assert not follower.is_primary
        wait_for(lambda: primary.is_primary, what="the eligible instance's election")
        assert Http(follower.url).register("s", V1).body == {"id": 1}
        assert Http(follower.url).get("/subjects").body == ["s"]
        assert Http(primary.url).get("/subjects").body == ["s"]
        # without a primary the follower cannot write (it never writes itself)
        primary.stop()
        orphan = Http(follower.url).register("t", V1)
        # 50003 while it still knows the old primary's address, 50004 once it knows none
        assert orphan.status == 500 and orphan.error_code in (50003, 50004)
        assert Http(follower.url).get("/subjects").body == ["s"]  # it still reads
    finally:
        follower.stop()
        primary.stop()


def test_without_the_broker_reads_go_on_and_writes_fail(samsa_broker: Broker) -> None:
    registry = start_registry(samsa_broker, **{"kafkastore.timeout.ms": "2000"})
    try:
        http = Http(registry.url)
        assert http.register("s", V1).body == {"id": 1}
        samsa_broker.stop()
        assert http.get("/subjects/s/versions/1").body["id"] == 1  # from memory
        failed = http.register("s", V2)
        assert (failed.status, failed.error_code) == (500, 50001), failed.body
    finally:
        registry.stop()


def test_a_schemas_topic_of_two_partitions_is_refused(samsa_broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap_servers})
    admin.create_topics([NewTopic("_schemas", 2, 1)])["_schemas"].result(30)
    with pytest.raises(RegistryError, match="has 2 partitions; it must have one"):
        start_registry(samsa_broker)
