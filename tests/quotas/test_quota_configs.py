"""The broker keys of the client quotas' windows (samsa/config.py): Kafka's names, defaults and
bounds; a bad value stops the broker before it starts, naming the key."""

from __future__ import annotations

import pytest

from samsa.config import BrokerConfig, ConfigError, java_double

KEYS = ("quota.window.num", "quota.window.size.seconds", "controller.quota.window.num",
        "controller.quota.window.size.seconds")


def test_kafkas_defaults() -> None:
    config = BrokerConfig({})
    assert [config.get(k) for k in KEYS] == [11, 1, 11, 1]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", ["0", "-3", "one", "1.5"])
def test_bad_values_are_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig({key: value})


@pytest.mark.parametrize(("value", "text"), [
    (1024.0, "1024.0"), (12.5, "12.5"), (1e7, "1.0E7"), (0.0005, "5.0E-4"),
    (2147483647.0, "2.147483647E9"), (0.001, "0.001"), (float("inf"), "Infinity")])
def test_quota_values_print_as_java_doubles(value: float, text: str) -> None:
    assert java_double(value) == text
