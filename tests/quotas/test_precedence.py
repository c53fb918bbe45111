"""Which quota applies to a request, and whose rate it counts against: Kafka's
ClientQuotaManager and DefaultQuotaCallback (samsa/server/quotas.py), the eight levels in
Kafka's order and the sensors Kafka shares."""

from __future__ import annotations

from samsa.cluster.client_quotas import DEFAULT, QuotaEntity
from samsa.server.quotas import ClientQuotaManager

LEVELS = [  # most specific first (ClientQuotaManager's doc)
    QuotaEntity("alice", "app"),
    QuotaEntity("alice", DEFAULT),
    QuotaEntity("alice", None),
    QuotaEntity(DEFAULT, "app"),
    QuotaEntity(DEFAULT, DEFAULT),
    QuotaEntity(DEFAULT, None),
    QuotaEntity(None, "app"),
    QuotaEntity(None, DEFAULT),
]


def manager() -> ClientQuotaManager:
    return ClientQuotaManager("Produce", "producer_byte_rate", 11, 1000)


def applied(m: ClientQuotaManager, user: str, client_id: str) -> float | None:
    return m.limit(m.tags(user, client_id))


def test_the_most_specific_level_wins_in_kafkas_order() -> None:
    m = manager()
    for i, entity in enumerate(LEVELS):
        m.update(entity, float(i + 1))
    for i, entity in enumerate(LEVELS):
        assert applied(m, "alice", "app") == float(i + 1), entity
        m.update(entity, None)
    assert applied(m, "alice", "app") is None
    assert m.enabled  # once enabled, until the restart (Kafka's quotasEnabled)


def test_other_users_and_clients_fall_to_the_defaults() -> None:
    m = manager()
    for i, entity in enumerate(LEVELS):
        m.update(entity, float(i + 1))
    assert applied(m, "bob", "app") == 4.0  # users/<default>/clients/app
    assert applied(m, "alice", "tool") == 2.0  # users/alice/clients/<default>
    assert applied(m, "bob", "tool") == 5.0  # users/<default>/clients/<default>
    m.update(QuotaEntity(DEFAULT, DEFAULT), None)
    assert applied(m, "bob", "tool") == 6.0  # users/<default>
    m.update(QuotaEntity(DEFAULT, None), None)
    assert applied(m, "bob", "tool") == 8.0  # clients/<default>


def test_sensors_are_shared_as_kafkas() -> None:
    m = manager()
    m.update(QuotaEntity("alice", None), 100.0)  # one level: users
    # every client of alice counts against alice's one rate
    assert m.sensor("alice", "a", 0) is m.sensor("alice", "b", 0)
    assert m.sensor("alice", "a", 0).tags == ("alice", "")
    assert m.sensor("bob", "a", 0).bound is None  # no quota for bob

    m = manager()
    m.update(QuotaEntity(None, DEFAULT), 100.0)  # one level: client ids
    # each client id its own rate, whichever user sends it
    assert m.sensor("alice", "a", 0) is m.sensor("bob", "a", 0)
    assert m.sensor("alice", "a", 0) is not m.sensor("alice", "b", 0)

    m.update(QuotaEntity("alice", "a"), 50.0)  # a second level: Kafka's chain decides
    assert m.sensor("alice", "a", 0).tags == ("alice", "a")
    assert m.sensor("alice", "a", 0).bound == 50.0
    assert m.sensor("bob", "a", 0).tags == ("", "a")
    assert m.sensor("bob", "a", 0).bound == 100.0


def test_a_changed_quota_reaches_existing_sensors() -> None:
    m = manager()
    m.update(QuotaEntity(None, "app"), 1000.0)
    sensor = m.sensor("u", "app", 0)
    # 20,000 bytes at once: 2,000/s over the 10 s a new sensor is given, twice the quota
    assert m.record("u", "app", 20_000, now_ms=0) == 10_000
    m.update(QuotaEntity(None, "app"), 4000.0)
    assert sensor.bound == 4000.0
    assert m.record("u", "app", 0, now_ms=0) == 0
    assert m.max_value_in_window("u", "app") == 4000.0 * 10


def test_no_client_id_has_no_client_quota() -> None:
    m = manager()
    m.update(QuotaEntity(None, DEFAULT), 100.0)
    # Kafka: an empty client id matches no client-id entity, not even the default
    assert applied(m, "alice", "") is None
    m.update(QuotaEntity("alice", None), 10.0)
    assert applied(m, "alice", "") == 10.0
