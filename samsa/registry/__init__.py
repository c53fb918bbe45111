"""A schema registry speaking Confluent Schema Registry's REST API (Avro, JSON Schema,
Protobuf), storing its state in the compacted ``_schemas`` topic of a Kafka cluster: a Kafka
client, no broker code.

    with SchemaRegistry({"kafkastore.bootstrap.servers": "127.0.0.1:9092",
                         "listeners": "http://127.0.0.1:0"}) as registry:
        SchemaRegistryClient({"url": registry.url})

``samsa schema-registry`` runs one from the command line; ``samsa.Broker(schema_registry=
True)`` starts one beside an embedded broker.
"""

from samsa.registry.server import RegistryConfigError, SchemaRegistry

__all__ = ["RegistryConfigError", "SchemaRegistry"]
