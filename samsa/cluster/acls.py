"""Where the authorizer's ACLs live, behind one interface (``AclStore``): CreateAcls and
DeleteAcls write through it, and it keeps the broker's ``AclAuthorizer`` (security/) current.

* A single node: ``FileAclStore``, a file in the metadata dir (the first log dir, as the topic
  store, ``topics.py``): ``__samsa_acls.json``, the nodes of Kafka's ZooKeeper layout
  (``security/acl_store.py``: ``/kafka-acl/Topic/orders`` -> AclEntry's JSON), written
  atomically before the authorizer changes. An I/O error takes the metadata dir offline (the
  broker halts, as it does for its topics) and the request answers KAFKA_STORAGE_ERROR.
* Cluster mode: ``samsa.zk.acls.ZkAclStore``, Kafka's znodes and change notifications, so every
  broker applies every change.

The mode builds its store (``Mode.acl_store``) when an authorizer is configured; ``start``
loads the ACLs before the listeners open, so no request is decided against an empty set.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, Protocol

from samsa.durable import write_atomically
from samsa.errors import KafkaError, KafkaStorageError
from samsa.security.acl import AclBinding, AclBindingFilter, create_error
from samsa.security.acl_store import acl_nodes, bindings_from_nodes
from samsa.security.authorizer import AclAuthorizer, AclDeleteResult
from samsa.storage.log_dir_failure import LogDirFailureChannel

log = logging.getLogger(__name__)

ACLS_FILE = "__samsa_acls.json"
FILE_VERSION = 1


class AclStore(Protocol):
    authorizer: AclAuthorizer

    async def start(self) -> None:
        """Load every stored ACL into the authorizer (and follow changes made elsewhere)."""

    async def create(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """CreateAcls: store and apply each binding; its error (INVALID_REQUEST for one Kafka
        refuses, a storage error) or None."""

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """DeleteAcls: the bindings each filter matched, removed from the store and the
        authorizer."""

    async def stop(self) -> None:
        """Stop following changes."""


def new_bindings(authorizer: AclAuthorizer, bindings: Sequence[AclBinding]
                 ) -> tuple[list[KafkaError | None], list[AclBinding]]:
    """(each binding's refusal or None, the valid bindings the authorizer does not hold yet)."""
    errors = [create_error(b) for b in bindings]
    held = set(authorizer.acls())
    fresh = [b for b, e in zip(bindings, errors, strict=True) if e is None and b not in held]
    return errors, list(dict.fromkeys(fresh))


class FileAclStore:
    """A single node's ACLs in ``<metadata dir>/__samsa_acls.json``."""

    def __init__(self, authorizer: AclAuthorizer, directory: Path,
                 failures: LogDirFailureChannel | None = None) -> None:
        self.authorizer = authorizer
        self.directory = Path(directory)
        self.path = self.directory / ACLS_FILE
        self._failures = failures

    async def start(self) -> None:
        self.authorizer.add(self._read(), validate=False)
        log.info("loaded %d ACLs from %s", len(self.authorizer), self.path)

    def _read(self) -> list[AclBinding]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        except OSError as exc:
            self._io_error("reading", exc)
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("version") != FILE_VERSION:
                raise ValueError(f"not an ACL file of version {FILE_VERSION}")
            nodes = {path: json.dumps(body).encode() for path, body in data["acls"].items()}
            return bindings_from_nodes(nodes)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise KafkaStorageError(f"cannot read the ACLs in {self.path}: {exc}") from None

    def _write(self, bindings: Sequence[AclBinding]) -> None:
        if self._failures is not None and self._failures.is_offline(self.directory):
            raise KafkaStorageError(f"the metadata dir {self.directory} of {ACLS_FILE} is "
                                    "offline")
        nodes = {path: json.loads(data) for path, data in sorted(acl_nodes(bindings).items())}
        try:
            write_atomically(self.path, json.dumps(
                {"version": FILE_VERSION, "acls": nodes}, indent=1, ensure_ascii=False
            ).encode())
        except OSError as exc:
            self._io_error("writing", exc)

    def _io_error(self, what: str, exc: OSError) -> NoReturn:
        """The metadata dir goes offline (the broker halts); the request fails."""
        if self._failures is not None:
            self._failures.maybe_add_offline_log_dir(self.directory, f"{what} {ACLS_FILE}", exc)
        raise KafkaStorageError(f"I/O error {what} {self.path}: {exc}") from exc

    async def create(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        errors, fresh = new_bindings(self.authorizer, bindings)
        if fresh:
            try:
                self._write([*self.authorizer.acls(), *fresh])
            except KafkaStorageError as exc:
                return [e if e is not None else exc for e in errors]
            self.authorizer.add(fresh)
        return errors

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        results = self.authorizer.matching(filters)
        doomed = {b for r in results for b in r.bindings}
        if doomed:
            try:
                self._write([b for b in self.authorizer.acls() if b not in doomed])
            except KafkaStorageError as exc:
                return [AclDeleteResult([], r.error or exc) for r in results]
            self.authorizer.remove(filters)
        return results

    async def stop(self) -> None:
        pass
