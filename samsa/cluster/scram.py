"""SCRAM credentials: where they are kept, and DescribeUserScramCredentials /
AlterUserScramCredentials as Kafka's ZkAdminManager answers them (KIP-554).

A user's credentials are kept as Kafka keeps them in ZooKeeper: a config of the user entity
whose keys are the mechanisms, ``SCRAM-SHA-256=salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=4096`` (other keys of the entity, such as quotas, are kept as they are).

* ``LocalScramStore`` (a single node): ``<metadata dir>/__samsa_scram_credentials.json``,
  ``{"version":1,"users":{"<user>":{"SCRAM-SHA-256":"salt=..."}}}``, written atomically before
  anything changes in memory; an I/O error takes the metadata dir offline and answers
  KAFKA_STORAGE_ERROR (the broker then halts, as for its topic store).
* ``samsa.zk.scram.ZkScramStore`` (cluster mode): ``/config/users/<user>`` and Kafka's change
  notifications, which every broker follows.

Each store keeps every credential in memory (``lookup``, read by each SCRAM exchange).
"""

from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from samsa.cluster.entity_file import EntityConfigFile
from samsa.errors import ErrorCode, KafkaError
from samsa.security.sasl.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    ScramMechanism,
)
from samsa.storage.log_dir_failure import LogDirFailureChannel

log = logging.getLogger(__name__)

SCRAM_FILE = "__samsa_scram_credentials.json"
UserConfig = dict[str, str]  # the user entity's config: mechanism name -> credential text


@dataclass(frozen=True)
class Upsertion:
    user: str
    mechanism: int  # Kafka's wire code (1: SCRAM-SHA-256, 2: SCRAM-SHA-512)
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class Deletion:
    user: str
    mechanism: int


@dataclass(frozen=True)
class UserResult:
    """One user's answer: an error (NONE on success) and, for Describe, (mechanism code,
    iterations) of each credential."""

    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()


_EMPTY_USER = "Username must not be empty"
_NO_SUCH_USER = "Attempt to describe a user credential that does not exist"
_DESCRIBE_ERROR = "Error processing describe user SCRAM credential configs request"


def credentials_of(config: Mapping[str, str], user: str = "?") -> dict[str, ScramCredential]:
    """The SCRAM credentials in a user entity's config (unreadable ones logged and skipped)."""
    found: dict[str, ScramCredential] = {}
    for mechanism in SCRAM_MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            found[mechanism] = ScramCredential.from_string(text)
        except ValueError as exc:
            log.warning("ignoring the %s credential of user %s: %s", mechanism, user, exc)
    return found


class ScramCredentialStore(ABC):
    def __init__(self) -> None:
        self._credentials: dict[str, dict[str, ScramCredential]] = {}

    # --- what a SCRAM exchange reads --------------------------------------------------------

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(self._credentials)

    def _apply(self, user: str, config: Mapping[str, str]) -> None:
        """The credentials of ``user`` are now those in ``config`` (its entity's config)."""
        found = credentials_of(config, user)
        if found:
            self._credentials[user] = found
        else:
            self._credentials.pop(user, None)

    # --- where credentials are kept ---------------------------------------------------------

    @abstractmethod
    async def start(self) -> None:
        """Load every credential (before the listeners open)."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop following changes."""

    @abstractmethod
    async def read_configs(self, users: Sequence[str] | None) -> dict[str, UserConfig]:
        """The configs of these users (None: of every user entity); a user without a config
        is absent."""

    @abstractmethod
    async def write_config(self, user: str, config: UserConfig) -> None:
        """Replace ``user``'s config (KafkaError: not written) and apply it here."""

    # --- the admin APIs ---------------------------------------------------------------------

    async def describe(self, users: Sequence[str] | None
                       ) -> tuple[ErrorCode, str | None, list[UserResult]]:
        """DescribeUserScramCredentials: (top-level error, its message, one result per user)."""
        every = not users
        results: dict[str, UserResult] = {}
        try:
            if every:
                configs = await self.read_configs(None)
                for user in sorted(configs):
                    found = _result(user, configs[user], explicit=False)
                    if found is not None:
                        results[user] = found
                return ErrorCode.none, None, list(results.values())
            assert users is not None
            illegal = {u for u in users if not u}
            for user in illegal:
                results[user] = UserResult(user, ErrorCode.resource_not_found, _EMPTY_USER)
            duplicated = {u for u in users if users.count(u) > 1} - illegal
            for user in duplicated:
                results[user] = UserResult(
                    user, ErrorCode.duplicate_resource,
                    f"Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {user}")
            wanted = [u for u in dict.fromkeys(users) if u not in illegal | duplicated]
            configs = await self.read_configs(wanted) if wanted else {}
            for user in wanted:
                results[user] = _result(user, configs.get(user, {}), explicit=True) or \
                    UserResult(user)
            return ErrorCode.none, None, [results[u] for u in dict.fromkeys(users)]
        except KafkaError as exc:
            log.warning("%s: %s", _DESCRIBE_ERROR, exc)
            return exc.code, str(exc), []

    async def alter(self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
                    ) -> list[UserResult]:
        """AlterUserScramCredentials, as Kafka's ZkAdminManager checks and applies it."""
        results: list[UserResult] = []
        illegal: dict[str, str] = {}
        for deletion in deletions:
            if not deletion.user:
                illegal[deletion.user] = _EMPTY_USER
            elif ScramMechanism.by_code(deletion.mechanism) is None:
                illegal[deletion.user] = "Unknown SCRAM mechanism"
        for upsertion in upsertions:
            if not upsertion.user:
                illegal[upsertion.user] = _EMPTY_USER
            elif ScramMechanism.by_code(upsertion.mechanism) is None:
                illegal[upsertion.user] = "Unknown SCRAM mechanism"
            elif upsertion.iterations > MAX_ITERATIONS:
                illegal[upsertion.user] = "Too many iterations"
            elif upsertion.iterations < MIN_ITERATIONS:
                illegal[upsertion.user] = "Too few iterations"
        for user, message in illegal.items():
            code = (ErrorCode.unsupported_sasl_mechanism if message == "Unknown SCRAM mechanism"
                    else ErrorCode.unacceptable_credential)
            results.append(UserResult(user, code, message))
        pairs = [(d.user, d.mechanism) for d in deletions if d.user not in illegal] + [
            (u.user, u.mechanism) for u in upsertions if u.user not in illegal]
        duplicated = {user for user, mechanism in pairs if pairs.count((user, mechanism)) > 1}
        for user in sorted(duplicated):
            results.append(UserResult(user, ErrorCode.duplicate_resource,
                                      "A user credential cannot be altered twice in the same "
                                      "request"))
        valid = list(dict.fromkeys(user for user, _ in pairs if user not in duplicated))
        try:
            configs = await self.read_configs(valid) if valid else {}
        except KafkaError as exc:
            return results + [UserResult(u, exc.code, str(exc)) for u in valid]
        missing = {d.user for d in deletions if d.user in valid and _name(d.mechanism) not in
                   configs.get(d.user, {})}
        for user in sorted(missing):
            results.append(UserResult(user, ErrorCode.resource_not_found,
                                      "Attempt to delete a user credential that does not "
                                      "exist"))
        for user in (u for u in valid if u not in missing):
            config = dict(configs.get(user, {}))
            for deletion in deletions:
                if deletion.user == user:
                    config.pop(_name(deletion.mechanism), None)
            for upsertion in upsertions:
                if upsertion.user == user:
                    mechanism = ScramMechanism.by_code(upsertion.mechanism)
                    assert mechanism is not None
                    config[mechanism.mechanism_name] = ScramCredential.from_salted_password(
                        mechanism, upsertion.salt, upsertion.salted_password,
                        upsertion.iterations).to_string()
            try:
                await self.write_config(user, config)
            except KafkaError as exc:
                log.info("Error encountered while altering user SCRAM credentials of %s: %s",
                         user, exc)
                results.append(UserResult(user, exc.code, str(exc)))
                continue
            results.append(UserResult(user))
        return results

    async def set_passwords(self, passwords: Mapping[str, str],
                            mechanisms: Iterable[str] = SCRAM_MECHANISMS,
                            iterations: int = MIN_ITERATIONS) -> None:
        """Create or replace users' credentials from their passwords (embedded brokers and
        tests; clients send salted passwords through AlterUserScramCredentials)."""
        upsertions = []
        for user, password in passwords.items():
            for name in mechanisms:
                mechanism = ScramMechanism.by_name(name)
                assert mechanism is not None, name
                salt = os.urandom(32)
                upsertions.append(Upsertion(user, mechanism.code, iterations, salt,
                                            mechanism.salted_password(password, salt,
                                                                      iterations)))
        for result in await self.alter((), upsertions):
            if result.error != ErrorCode.none:
                raise KafkaError(f"cannot set the SCRAM credentials of {result.user}: "
                                 f"{result.message}", result.error)


def _name(code: int) -> str:
    mechanism = ScramMechanism.by_code(code)
    return mechanism.mechanism_name if mechanism is not None else "UNKNOWN"


def _result(user: str, config: Mapping[str, str], explicit: bool) -> UserResult | None:
    """Kafka's addToResultsIfHasScramCredential."""
    present = [m for m in ScramMechanism if m.mechanism_name in config]
    if not present:
        return UserResult(user, ErrorCode.resource_not_found, f"{_NO_SUCH_USER}: {user}") \
            if explicit else None
    try:
        return UserResult(user, credentials=tuple(
            (m.code, ScramCredential.from_string(config[m.mechanism_name]).iterations)
            for m in present))
    except ValueError as exc:
        return UserResult(user, ErrorCode.unknown_server_error, f"{_DESCRIBE_ERROR}: {exc}")


class LocalScramStore(ScramCredentialStore):
    """A single node's credentials, in its metadata dir."""

    def __init__(self, directory: Path, failures: LogDirFailureChannel | None = None) -> None:
        super().__init__()
        # salts and keys: readable by the broker alone, against dictionary attacks
        self.file = EntityConfigFile(directory, SCRAM_FILE, "users", failures, mode=0o600)
        self._configs: dict[str, UserConfig] = {}

    async def start(self) -> None:
        self._configs = self.file.read()
        for user, config in self._configs.items():
            self._apply(user, config)

    async def stop(self) -> None:
        pass

    async def read_configs(self, users: Sequence[str] | None) -> dict[str, UserConfig]:
        wanted = self._configs if users is None else {u: self._configs[u] for u in users
                                                      if u in self._configs}
        return {u: dict(c) for u, c in wanted.items()}

    async def write_config(self, user: str, config: UserConfig) -> None:
        configs = {**self._configs, user: dict(config)}
        if not config:
            configs.pop(user)
        self.file.write(configs)
        self._configs = configs
        self._apply(user, config)
