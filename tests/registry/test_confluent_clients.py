"""confluent-kafka's schema registry client and serializers, unchanged, against samsa's
registry: records produced and consumed through a real broker."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from samsa.embedded import Broker

from .helpers import record

USER_V1 = record("User", ("name", "string"), ("age", "int"))
USER_V2 = record("User", ("name", "string"), ("age", "int"), ("email", ["null", "string"], None))


def _round_trip(broker: Broker, topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(600):  # bounded: 600 polls of at most 0.1 s
            if len(got) == len(values):
                break
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert len(got) == len(values)
    return got


@pytest.mark.samsa_broker(schema_registry=True)
def test_avro_serializer_round_trip_through_the_embedded_registry(samsa_broker: Broker) -> None:
    client = SchemaRegistryClient({"url": samsa_broker.schema_registry_url})
    topic = "users"
    serializer = AvroSerializer(client, json.dumps(USER_V1))
    context = SerializationContext(topic, MessageField.VALUE)
    users = [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}]
    payloads = [serializer(u, context) for u in users]
    assert all(p[0] == 0 for p in payloads)  # Confluent's wire format: magic byte, then the id
    schema_id = int.from_bytes(payloads[0][1:5], "big")
    assert client.get_latest_version("users-value").schema_id == schema_id

    # a fresh client (no cache) resolves the id through the registry
    reader = AvroDeserializer(SchemaRegistryClient({"url": samsa_broker.schema_registry_url}))
    got = [reader(v, context) for v in _round_trip(samsa_broker, topic, payloads)]
    assert got == users


def test_avro_schema_evolution_and_reader_schema(samsa_broker: Broker, registry: Any) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    context = SerializationContext("people", MessageField.VALUE)
    v1 = AvroSerializer(client, json.dumps(USER_V1))
    v2 = AvroSerializer(client, json.dumps(USER_V2))
    written = [v1({"name": "ada", "age": 36}, context),
               v2({"name": "grace", "age": 85, "email": "g@example.com"}, context)]
    assert client.get_versions("people-value") == [1, 2]
    # a reader on v2 reads both (Avro resolution: email's default for v1's record)
    reader = AvroDeserializer(SchemaRegistryClient({"url": registry.url}),
                              json.dumps(USER_V2))
    got = [reader(v, context) for v in _round_trip(samsa_broker, "people", written)]
    assert got == [{"name": "ada", "age": 36, "email": None},
                   {"name": "grace", "age": 85, "email": "g@example.com"}]
    # an incompatible v3 (a new field without a default) is refused: 409
    v3 = json.dumps(record("User", ("name", "string"), ("age", "int"), ("city", "string")))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("people-value", Schema(v3, "AVRO"))
    assert refused.value.http_status_code == 409
    assert refused.value.error_code == 409


def test_json_serializer_round_trip(samsa_broker: Broker, registry: Any) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    schema = json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
        "required": ["id"],
    })
    context = SerializationContext("orders", MessageField.VALUE)
    serializer = JSONSerializer(schema, client)
    orders = [{"id": 1, "item": "tea"}, {"id": 2, "item": "cake"}]
    payloads = [serializer(o, context) for o in orders]
    registered = client.get_latest_version("orders-value")
    assert registered.schema.schema_type == "JSON"
    assert int.from_bytes(payloads[0][1:5], "big") == registered.schema_id
    reader = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient(
        {"url": registry.url}))
    assert [reader(p, context) for p in _round_trip(samsa_broker, "orders", payloads)] == orders


def test_client_admin_calls(registry: Any) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    first = client.register_schema("a-value", Schema(json.dumps(USER_V1), "AVRO"))
    again = client.register_schema("b-value", Schema(json.dumps(USER_V1), "AVRO"))
    assert first == again  # one id for one schema, across subjects
    assert sorted(client.get_subjects()) == ["a-value", "b-value"]
    found = client.lookup_schema("a-value", Schema(json.dumps(USER_V1), "AVRO"))
    assert (found.schema_id, found.version) == (first, 1)
    assert client.get_schema(first).schema_str == json.dumps(USER_V1, separators=(",", ":"))
    assert client.test_compatibility("a-value", Schema(json.dumps(USER_V2), "AVRO"))
    client.set_compatibility("a-value", "FULL")
    assert client.get_compatibility("a-value") == "FULL"
    assert client.get_compatibility() == "BACKWARD"
    assert client.delete_subject("b-value") == [1]
    assert client.delete_subject("b-value", permanent=True) == [1]
    assert client.get_subjects() == ["a-value"]
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_latest_version("b-value")
    assert missing.value.error_code == 40401


def _item_class() -> Any:
    """A protobuf message class built at run time (as protoc's generated code would be)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="shop/item.proto", package="shop",
                                              syntax="proto3")
    kind = file.enum_type.add(name="Kind")
    kind.value.add(name="KIND_UNKNOWN", number=0)
    kind.value.add(name="BOOK", number=1)
    item = file.message_type.add(name="Item")
    item.field.add(name="name", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    item.field.add(name="count", number=2, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    item.field.add(name="kind", number=3, type=field.TYPE_ENUM, type_name=".shop.Kind",
                   label=field.LABEL_OPTIONAL)
    item.field.add(name="tags", number=4, type=field.TYPE_STRING, label=field.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Item"))


def test_protobuf_serializer_round_trip(samsa_broker: Broker, registry: Any) -> None:
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )

    item = _item_class()
    client = SchemaRegistryClient({"url": registry.url})
    context = SerializationContext("items", MessageField.VALUE)
    serializer = ProtobufSerializer(item, client, {"use.deprecated.format": False})
    items = [item(name="dune", count=2, kind=1, tags=["sf"]), item(name="emma", count=1)]
    payloads = [serializer(i, context) for i in items]
    registered = client.get_latest_version("items-value")
    assert registered.schema.schema_type == "PROTOBUF"
    # stored as .proto text, as Confluent's registry keeps it
    assert "message Item {" in registered.schema.schema_str
    assert "package shop;" in registered.schema.schema_str
    reader = ProtobufDeserializer(item, {"use.deprecated.format": False},
                                  schema_registry_client=SchemaRegistryClient(
                                      {"url": registry.url}))
    got = [reader(p, context) for p in _round_trip(samsa_broker, "items", payloads)]
    assert got == items


@pytest.mark.samsa_broker(security_protocol="SASL_SSL", schema_registry=True)
def test_the_embedded_registry_beside_a_sasl_ssl_broker(samsa_broker: Broker) -> None:
    """The registry's clients get the broker's client settings (kafkastore.*: TLS, SCRAM)."""
    client = SchemaRegistryClient({"url": samsa_broker.schema_registry_url})
    schema_id = client.register_schema("secure-value", Schema(json.dumps(USER_V1), "AVRO"))
    assert client.get_schema(schema_id).schema_type == "AVRO"
    registry = samsa_broker.schema_registry
    assert registry is not None and registry.client_extra["security.protocol"] == "SASL_SSL"
