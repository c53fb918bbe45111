"""DescribeClientQuotas and AlterClientQuotas on a single node, in raw frames (neither
confluent-kafka nor kafka-python has client quota APIs): every kind of entity, Kafka's filter
semantics, Kafka's error codes and messages for bad input (which changes nothing), and the
quotas kept across a restart in the metadata dir."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_frames import FrameClient

import samsa

from .support import CLIENT_ID, USER, alter, describe, described, set_quotas

INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
PRODUCE, CONSUME = "producer_byte_rate", "consumer_byte_rate"
REQUEST, MUTATIONS = "request_percentage", "controller_mutation_rate"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path / "data") as b:
        yield b


@pytest.fixture
def client(broker: samsa.Broker) -> Iterator[FrameClient]:
    with FrameClient(broker.bootstrap_servers) as c:
        yield c


EVERY_KIND = [
    [(USER, "alice")],
    [(USER, None)],
    [(CLIENT_ID, "app")],
    [(CLIENT_ID, None)],
    [(USER, "alice"), (CLIENT_ID, "app")],
    [(USER, "alice"), (CLIENT_ID, None)],
    [(USER, None), (CLIENT_ID, "app")],
    [(USER, None), (CLIENT_ID, None)],
]


def key(components: list[tuple[str, str | None]]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(components))


def set_every_kind(client: FrameClient) -> None:
    for i, components in enumerate(EVERY_KIND):
        set_quotas(client, components, producer_byte_rate=1024 * (i + 1))


def test_every_kind_of_entity_and_the_filters(client: FrameClient) -> None:
    set_every_kind(client)
    set_quotas(client, [(USER, "alice")], consumer_byte_rate=2048, request_percentage=12.5,
               controller_mutation_rate=0.5)
    everything = described(client)
    assert set(everything) == {key(c) for c in EVERY_KIND}
    assert everything[key([(USER, "alice")])] == {PRODUCE: 1024.0, CONSUME: 2048.0,
                                                  REQUEST: 12.5, MUTATIONS: 0.5}
    assert everything[key([(USER, None), (CLIENT_ID, None)])] == {PRODUCE: 8 * 1024.0}
    # the wire's default entity is a null name
    response = describe(client, [(USER, DEFAULT, None)], strict=True)
    assert [[(e.entity_type, e.entity_name) for e in x.entity] for x in response.entries] == [
        [(USER, None)]]

    def kinds(components: list[tuple[str, int, str | None]], strict: bool) -> set[Any]:
        return set(described(client, components, strict))

    alice = [(USER, EXACT, "alice")]
    assert kinds(alice, strict=True) == {key([(USER, "alice")])}
    assert kinds(alice, strict=False) == {key([(USER, "alice")]),
                                          key([(USER, "alice"), (CLIENT_ID, "app")]),
                                          key([(USER, "alice"), (CLIENT_ID, None)])}
    assert kinds([(CLIENT_ID, SPECIFIED, None)], strict=True) == {
        key([(CLIENT_ID, "app")]), key([(CLIENT_ID, None)])}
    assert kinds([(USER, DEFAULT, None), (CLIENT_ID, SPECIFIED, None)], strict=True) == {
        key([(USER, None), (CLIENT_ID, "app")]), key([(USER, None), (CLIENT_ID, None)])}
    assert kinds([(USER, SPECIFIED, None), (CLIENT_ID, EXACT, "app")], strict=False) == {
        key([(USER, "alice"), (CLIENT_ID, "app")]), key([(USER, None), (CLIENT_ID, "app")])}
    assert kinds([(USER, EXACT, "nobody")], strict=False) == set()
    assert kinds([], strict=True) == set()
    assert kinds([("ip", SPECIFIED, None)], strict=False) == set()  # no IP quotas here

    # removing a key, then the last one: the entity is gone
    set_quotas(client, [(USER, "alice")], producer_byte_rate=None, consumer_byte_rate=None,
               request_percentage=None)
    assert described(client, alice, strict=True) == {key([(USER, "alice")]): {MUTATIONS: 0.5}}
    set_quotas(client, [(USER, "alice")], controller_mutation_rate=None)
    assert described(client, alice, strict=True) == {}


def test_both_versions(client: FrameClient) -> None:
    for version in (0, 1):
        ((code, _, answered),) = alter(client, [([(CLIENT_ID, f"v{version}")],
                                                 {PRODUCE: 100.0})], version=version)
        assert code == 0 and answered == [(CLIENT_ID, f"v{version}")]
        response = describe(client, [(CLIENT_ID, EXACT, f"v{version}")], version=version)
        assert [v.value for entry in response.entries for v in entry.values] == [100.0]


@pytest.mark.parametrize(("components", "ops", "message"), [
    ([], {PRODUCE: 10.0}, "Invalid empty client quota entity"),
    ([("group", "g")], {PRODUCE: 10.0}, "Unhandled client quota entity type: group"),
    ([(USER, "")], {PRODUCE: 10.0}, "Empty user not supported"),
    ([(CLIENT_ID, "")], {PRODUCE: 10.0}, "Empty client-id not supported"),
    ([(USER, "bob")], {PRODUCE: -1.0}, "Quota producer_byte_rate must be greater than 0"),
    ([(USER, "bob")], {CONSUME: 0.0}, "Quota consumer_byte_rate must be greater than 0"),
    ([(USER, "bob")], {REQUEST: math.nan}, "Quota request_percentage must be greater than 0"),
    ([(USER, "bob")], {MUTATIONS: -0.5}, "Quota controller_mutation_rate must be greater than 0"),
    ([(USER, "bob")], {PRODUCE: 10.5}, "producer_byte_rate cannot be a fractional value."),
    ([(USER, "bob")], {PRODUCE: 1e19}, "Proposed value for producer_byte_rate is too large for "
                                       "a LONG."),
    ([(USER, "bob")], {"producer_byte_rates": 10.0},
     "Invalid configuration key producer_byte_rates"),
    ([(USER, "bob")], {"SCRAM-SHA-256": 10.0}, "Invalid configuration key SCRAM-SHA-256"),
    ([("ip", "127.0.0.1")], {"connection_creation_rate": 10.0}, "IP quotas"),
    ([("ip", "127.0.0.1"), (USER, "bob")], {PRODUCE: 10.0},
     "Invalid quota entity combination, IP entity shouldnot be combined with User or "
     "ClientId"),
])
def test_bad_alterations_get_kafkas_errors_and_change_nothing(
        client: FrameClient, components: list[tuple[str, str | None]],
        ops: dict[str, float | None], message: str) -> None:
    set_quotas(client, [(USER, "bob")], producer_byte_rate=5000)
    before = described(client)
    for validate_only in (True, False):
        ((code, got, _),) = alter(client, [(components, {REQUEST: 20.0, **ops})],
                                  validate_only=validate_only)
        assert code == INVALID_REQUEST
        assert got is not None and got.startswith(message), got
        assert described(client) == before


def test_one_bad_entity_leaves_the_others_applied(client: FrameClient) -> None:
    results = alter(client, [
        ([(USER, "carol")], {PRODUCE: 1000.0}),
        ([(USER, "dave")], {PRODUCE: -5.0}),
        ([(USER, "erin")], {PRODUCE: 1.0, CONSUME: 2.0}),
    ])
    assert [(code, answered) for code, _, answered in results] == [
        (0, [(USER, "carol")]), (INVALID_REQUEST, [(USER, "dave")]), (0, [(USER, "erin")])]
    assert set(described(client)) == {key([(USER, "carol")]), key([(USER, "erin")])}


def test_a_key_or_an_entity_twice(client: FrameClient) -> None:
    response = client.request(49, 1, {"entries": [
        {"entity": [{"entity_type": USER, "entity_name": "fay"}],
         "ops": [{"key": PRODUCE, "value": 10.0, "remove": False},
                 {"key": PRODUCE, "value": 20.0, "remove": False}]}],
        "validate_only": False})
    (entry,) = response.entries
    assert entry.error_code == INVALID_REQUEST
    assert entry.error_message.startswith("Duplicate quota key producer_byte_rate")
    assert described(client) == {}

    # one answer per entity, as Kafka's; neither alteration applied
    results = alter(client, [([(USER, "gus")], {PRODUCE: 10.0}),
                             ([(CLIENT_ID, "kit")], {PRODUCE: 30.0}),
                             ([(USER, "gus")], {PRODUCE: 20.0})])
    assert results == [
        (INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={user=gus})",
         [(USER, "gus")]),
        (0, None, [(CLIENT_ID, "kit")])]
    assert described(client) == {key([(CLIENT_ID, "kit")]): {PRODUCE: 30.0}}


def test_validate_only_changes_nothing(client: FrameClient) -> None:
    ((code, message, _),) = alter(client, [([(USER, "hal")], {PRODUCE: 10.0})],
                                  validate_only=True)
    assert (code, message) == (0, None)
    assert described(client) == {}


@pytest.mark.parametrize(("components", "code", "message"), [
    ([("", EXACT, "x")], INVALID_REQUEST, "Invalid empty entity type."),
    ([(USER, EXACT, "a"), (USER, SPECIFIED, None)], INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("group", SPECIFIED, None)], UNSUPPORTED_VERSION, "Unsupported entity type group"),
    ([(USER, EXACT, None)], INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([(USER, DEFAULT, "a")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([(USER, SPECIFIED, "a")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([(USER, 7, None)], INVALID_REQUEST, "Unknown match type 7"),
    ([("ip", SPECIFIED, None), (CLIENT_ID, SPECIFIED, None)], INVALID_REQUEST,
     "Invalid entity filter component combination. IP filter component should not be used "
     "with user or clientId filter component."),
])
def test_bad_filters_are_refused(client: FrameClient, components: list[Any], code: int,
                                 message: str) -> None:
    set_quotas(client, [(USER, "ivy")], producer_byte_rate=10)
    response = describe(client, components)
    assert (response.error_code, response.error_message) == (code, message)
    assert response.entries is None


def test_quotas_survive_a_restart_in_kafkas_layout(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with samsa.Broker(data) as broker, FrameClient(broker.bootstrap_servers) as client:
        set_quotas(client, [(USER, "j@example.com"), (CLIENT_ID, None)], producer_byte_rate=4096,
                   request_percentage=50)
        set_quotas(client, [(CLIENT_ID, "<default>")], consumer_byte_rate=1)  # a real name
    stored = json.loads((data / "__samsa_client_quotas.json").read_text())
    # Kafka's ZooKeeper entity paths, names sanitized, values as Kafka writes them
    assert stored == {"version": 1, "entities": {
        "users/j%40example.com/clients/<default>": {PRODUCE: "4096", REQUEST: "50.0"},
        "clients/%3Cdefault%3E": {CONSUME: "1"}}}
    with samsa.Broker(data) as broker, FrameClient(broker.bootstrap_servers) as client:
        assert described(client) == {
            key([(USER, "j@example.com"), (CLIENT_ID, None)]): {PRODUCE: 4096.0, REQUEST: 50.0},
            key([(CLIENT_ID, "<default>")]): {CONSUME: 1.0}}
        assert broker.server.quotas.produce.enabled
