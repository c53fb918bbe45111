"""The ACLs of a ZooKeeper-mode cluster, as Kafka's ZooKeeper ``AclAuthorizer`` keeps them
(``security/acl_store.py`` has the layout): one znode per resource pattern under
``/kafka-acl/<Type>/<name>`` (LITERAL) or ``/kafka-acl-extended/prefixed/<Type>/<name>``, and a
sequential change notification under ``/kafka-acl-changes`` or ``/kafka-acl-extended-changes``
after every change, so Kafka's tools and brokers and samsa's read the same ACLs.

Every broker loads every pattern's node at start-up, before its listeners open, then follows
both change roots (Kafka's ZkNodeChangeNotificationListener): each notification newer than the
last one it handled names a pattern, whose node it reads again and applies to its authorizer
(a node that is gone: the pattern has no ACLs any more). Notifications older than 15 minutes
are deleted, as Kafka's listener does.

CreateAcls and DeleteAcls on any broker change a pattern's node by read-modify-write,
conditional on the version read (retried when another broker wrote meanwhile; an emptied node
is deleted), apply what they wrote to the local authorizer, then announce the change. One
broker makes one such change at a time (Kafka's authorizer holds its write lock), so only other
brokers' writes make it retry. Every ZooKeeper call runs off the event loop; the authorizer is
only changed on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from samsa.errors import ErrorCode, KafkaError
from samsa.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
    ResourceType,
    create_error,
)
from samsa.security.acl_store import (
    ACL_ROOTS,
    CHANGE_PREFIX,
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    bindings_from_nodes,
    change_notification,
    decode_acls,
    encode_acls,
    pattern_from_change,
    resource_path,
    resource_type_path,
)
from samsa.security.authorizer import AclAuthorizer, AclDeleteResult
from samsa.zk.zk_client import ZkClient

log = logging.getLogger(__name__)

CHANGE_ROOTS = (LITERAL_CHANGES, EXTENDED_CHANGES)
CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's AclAuthorizer changeExpirationMs
MAX_UPDATE_RETRIES = 10  # Kafka's AclAuthorizer maxUpdateRetries
UPDATE_BACKOFF_S, UPDATE_JITTER_S = 0.1, 0.05  # its retryBackoffMs and retryBackoffJitterMs
_RETRY_BACKOFF_S = 0.5  # reading notifications again after ZooKeeper failed

Entries = frozenset[AccessControlEntry]


def _sequence(child: str) -> int:
    """The sequence number of a change node (``acl_changes_0000000007`` -> 7); -1 if none."""
    try:
        return int(child[len(CHANGE_PREFIX):]) if child.startswith(CHANGE_PREFIX) else -1
    except ValueError:
        return -1


class ZkAclStore:
    def __init__(self, authorizer: AclAuthorizer, zk: ZkClient) -> None:
        self.authorizer = authorizer
        self.client = zk.client  # kazoo
        self._last = dict.fromkeys(CHANGE_ROOTS, -1)  # the last notification handled, by root
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._changing = asyncio.Lock()  # one change of this broker at a time

    # --- start-up and following changes ---------------------------------------------------------

    async def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        # the watches first: a change made during the load is seen after it
        await loop.run_in_executor(None, self._ensure_paths_and_watch)
        nodes = await loop.run_in_executor(None, self._read_all)
        self.authorizer.add(nodes, validate=False)
        log.info("loaded %d ACLs from ZooKeeper", len(self.authorizer))
        self._task = loop.create_task(self._follow())

    def _ensure_paths_and_watch(self) -> None:
        """Kafka's createAclPaths (each store's root and resource type paths, the change
        roots), then a watch on each change root."""
        types = [t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)]
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for resource_type in types:
                self.client.ensure_path(resource_type_path(pattern_type, resource_type))
        for root in CHANGE_ROOTS:
            self.client.ensure_path(root)
            self.client.ChildrenWatch(root, self._on_children)

    def _read_all(self) -> list[AclBinding]:
        bindings: list[AclBinding] = []
        for root in ACL_ROOTS:
            for type_name in self._children(root):
                for name in self._children(f"{root}/{type_name}"):
                    path = f"{root}/{type_name}/{name}"
                    try:
                        data, _ = self.client.get(path)
                        bindings.extend(bindings_from_nodes({path: data}))
                    except NoNodeError:
                        continue  # deleted meanwhile
                    except ValueError as exc:
                        log.error("skipping the ACLs of %s, which cannot be read: %s", path, exc)
        return bindings

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(path))
        except NoNodeError:
            return []

    def _on_children(self, _children: list[str]) -> bool | None:
        """A change root's children changed (kazoo's thread): wake the follower on the loop."""
        loop, changed = self._loop, self._changed
        if self._stopped or loop is None or changed is None or loop.is_closed():
            return False  # kazoo drops the watch
        loop.call_soon_threadsafe(changed.set)
        return None

    async def _follow(self) -> None:
        assert self._loop is not None and self._changed is not None
        loop, changed = self._loop, self._changed
        while not self._stopped:
            await changed.wait()
            changed.clear()
            try:
                updates, complete = await loop.run_in_executor(None, self._read_changes)
            except Exception:  # ZooKeeper unreachable for now: the next change or retry
                log.exception("reading ACL change notifications failed; retrying")
                updates, complete = [], False
            for pattern, entries in updates:
                self.authorizer.replace(pattern, entries)
            if not complete:
                await asyncio.sleep(_RETRY_BACKOFF_S)
                changed.set()

    def _read_changes(self) -> tuple[list[tuple[ResourcePattern, Entries]], bool]:
        """The patterns of every notification not handled yet, each with its ACLs as its node
        holds them now; whether every notification could be read."""
        updates: list[tuple[ResourcePattern, Entries]] = []
        for root in CHANGE_ROOTS:
            try:
                children = sorted((c for c in self.client.get_children(root)
                                   if _sequence(c) >= 0), key=_sequence)
                for child in children:
                    sequence = _sequence(child)
                    if sequence <= self._last[root]:
                        continue
                    found = self._read_change(root, child)
                    if found is not None:
                        updates.append(found)
                    self._last[root] = sequence
                self._purge(root, children)
            except KazooException as exc:
                log.warning("reading ACL changes under %s failed: %s", root, exc)
                return updates, False
        return updates, True

    def _read_change(self, root: str, child: str) -> tuple[ResourcePattern, Entries] | None:
        try:
            data, _ = self.client.get(f"{root}/{child}")
            pattern = pattern_from_change(root, data or b"")
        except NoNodeError:
            return None  # purged meanwhile: a later notification or the load covers it
        except ValueError as exc:
            log.error("skipping ACL change notification %s/%s: %s", root, child, exc)
            return None
        if pattern.resource_type is ResourceType.UNKNOWN:
            return None
        try:
            entries, _ = self._read_entries(pattern)
        except ValueError as exc:
            log.error("skipping the ACLs of %s, which cannot be read: %s",
                      resource_path(pattern), exc)
            return None
        return pattern, entries

    def _purge(self, root: str, children: list[str]) -> None:
        """Delete notifications older than CHANGE_EXPIRATION_MS (oldest first)."""
        now = time.time() * 1000
        for child in children:
            path = f"{root}/{child}"
            stat = self.client.exists(path)
            if stat is None:
                continue
            if now - stat.ctime <= CHANGE_EXPIRATION_MS:
                return
            try:
                self.client.delete(path)
            except NoNodeError:
                pass

    def _read_entries(self, pattern: ResourcePattern) -> tuple[Entries, int | None]:
        """A pattern's ACLs and its node's version (None: no node)."""
        try:
            data, stat = self.client.get(resource_path(pattern))
        except NoNodeError:
            return frozenset(), None
        return frozenset(decode_acls(data)), stat.version

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # --- changes --------------------------------------------------------------------------------

    def _update(self, pattern: ResourcePattern, change: Callable[[Entries], Entries]) -> Entries:
        """Read-modify-write of a pattern's node, conditional on the version read; then the
        change notification. Returns the pattern's ACLs as written (or found unchanged)."""
        for attempt in range(MAX_UPDATE_RETRIES):
            current, version = self._read_entries(pattern)
            new = change(current)
            if new == current:
                return current
            path = resource_path(pattern)
            try:
                if not new:
                    assert version is not None  # current was not empty
                    self.client.delete(path, version=version)
                elif version is None:
                    self.client.create(path, encode_acls(new), makepath=True)
                else:
                    self.client.set(path, encode_acls(new), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                log.debug("ACLs of %s changed meanwhile (attempt %d); retrying", path,
                          attempt + 1)
                time.sleep(UPDATE_BACKOFF_S + random.uniform(0, UPDATE_JITTER_S))
                continue
            notification, data = change_notification(pattern)
            self.client.create(notification, data, sequence=True, makepath=True)
            return new
        raise KafkaError(f"Failed to update ACLs for {pattern} after {MAX_UPDATE_RETRIES} "
                         "retries: other brokers kept changing them")

    async def _apply(self, pattern: ResourcePattern,
                     change: Callable[[Entries], Entries]) -> KafkaError | None:
        loop = asyncio.get_running_loop()
        try:
            written = await loop.run_in_executor(None, self._update, pattern, change)
        except KafkaError as exc:
            return exc
        except (KazooException, ValueError) as exc:
            return KafkaError(f"Failed to update ACLs for {pattern}: {exc}",
                              ErrorCode.unknown_server_error)
        self.authorizer.replace(pattern, written)
        return None

    async def create(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        async with self._changing:
            return await self._create(bindings)

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        async with self._changing:
            return await self._delete(filters)

    async def _create(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        results: list[KafkaError | None] = []
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, binding in enumerate(bindings):
            failure = create_error(binding)
            results.append(failure)
            if failure is None:
                by_pattern.setdefault(binding.pattern, []).append(index)
        for pattern, indexes in by_pattern.items():
            added = frozenset(bindings[i].entry for i in indexes)
            failure = await self._apply(pattern, lambda current, a=added: current | a)
            for i in indexes:
                results[i] = failure
        return results

    async def _delete(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        results = self.authorizer.matching(filters)
        doomed: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for result in results:
            for binding in result.bindings:
                doomed.setdefault(binding.pattern, set()).add(binding.entry)
        failures: dict[ResourcePattern, KafkaError] = {}
        for pattern, entries in doomed.items():
            gone = frozenset(entries)
            failure = await self._apply(pattern, lambda current, g=gone: current - g)
            if failure is not None:
                failures[pattern] = failure
        if not failures:
            return results
        return [AclDeleteResult(r.bindings, r.error or next(
            (failures[b.pattern] for b in r.bindings if b.pattern in failures), None))
            for r in results]
