"""Topic metadata of a broker: names, ids, partition counts and config overrides.

Kept in ``<first log dir>/__samsa_topics.json`` (written atomically).

* A single node: this is the cluster's metadata, and the first log dir is its metadata dir
  (Kafka's metadata.log.dir, by default the first of log.dirs, where a KRaft node keeps its
  metadata log). An I/O error on the file takes that dir offline (``failures``) and the change
  is refused (KafkaStorageError, nothing changed in memory either); the broker then halts, as
  Kafka's does when its metadata log dir fails (KIP-858), and does not start until the dir is
  repaired: a store that silently fell behind on one disk could later disagree with the logs
  on another.
* Cluster mode (``cache``): the same facts live in ZooKeeper, and this is the broker's copy of
  them; the first log dir is a log dir like the others. When the file cannot be read or
  written, the dir goes offline (its partitions with it, as for any I/O error there) and the
  store carries on in memory, filled from ZooKeeper; it is not written while the dir is
  offline. What the file adds in cluster mode is knowing, at the next start, which topic ids
  this broker's logs belonged to (a topic deleted and created again while the broker was away):
  a start with the first dir offline goes without it.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from samsa.durable import write_atomically
from samsa.errors import KafkaStorageError
from samsa.storage.log_dir_failure import LogDirFailureChannel

log = logging.getLogger(__name__)

TOPICS_FILE = "__samsa_topics.json"
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_problem(name: str) -> str | None:
    """Kafka's topic name rules; None when the name is legal."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.match(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # topic-level overrides only
    internal: bool = False


class TopicStore:
    def __init__(self, directory: Path, failures: LogDirFailureChannel | None = None, *,
                 cache: bool = False) -> None:
        """``failures``: where an I/O error on the file takes ``directory`` offline;
        ``cache``: cluster mode (see the module's docstring)."""
        self.directory = Path(directory)
        self.path = self.directory / TOPICS_FILE
        self.topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._failures = failures
        self.cache = cache
        self._load()

    def _io_error(self, what: str, exc: OSError) -> None:
        """Report an I/O error on the file: its directory goes offline. Raises unless the
        store is a cache."""
        if self._failures is not None:
            self._failures.maybe_add_offline_log_dir(self.directory, f"{what} {TOPICS_FILE}",
                                                     exc)
        if not self.cache:
            raise KafkaStorageError(f"I/O error {what} {self.path}: {exc}") from exc
        log.warning("the topic store is kept in memory only from now on: %s %s failed: %s",
                    what, self.path, exc)

    def _load(self) -> None:
        if self._offline():
            if not self.cache:
                raise KafkaStorageError(f"the log dir {self.directory} of {TOPICS_FILE} "
                                        "is offline")
            return
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except OSError as exc:
            self._io_error("reading", exc)
            return
        for t in data.get("topics", []):
            topic = Topic(
                t["name"], uuid.UUID(t["id"]), int(t["partitions"]), dict(t.get("configs", {})),
                bool(t.get("internal", False)),
            )
            self._add(topic)

    def _offline(self) -> bool:
        return self._failures is not None and self._failures.is_offline(self.directory)

    def _save(self) -> None:
        if self._offline():
            if self.cache:
                return  # in memory only until the dir is back (a restart)
            raise KafkaStorageError(f"the log dir {self.directory} of {TOPICS_FILE} is offline")
        data = {
            "version": 1,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
                 "configs": t.configs, "internal": t.internal}
                for t in self.topics.values()
            ],
        }
        try:
            write_atomically(self.path, json.dumps(data, indent=1).encode())
        except OSError as exc:
            self._io_error("writing", exc)

    def _add(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def create(
        self, name: str, partitions: int, configs: dict[str, str] | None = None,
        internal: bool = False, topic_id: uuid.UUID | None = None,
    ) -> Topic:
        """A new topic; ``topic_id`` when the cluster already named it (ZooKeeper mode)."""
        topic = Topic(name, topic_id or uuid.uuid4(), partitions, dict(configs or {}), internal)
        self._add(topic)
        self._commit(lambda: self._remove(topic))
        return topic

    def delete(self, name: str) -> Topic | None:
        topic = self.topics.get(name)
        if topic is not None:
            self._remove(topic)
            self._commit(lambda: self._add(topic))
        return topic

    def set_partitions(self, name: str, partitions: int) -> None:
        topic = self.topics[name]
        before, topic.partitions = topic.partitions, partitions
        self._commit(lambda: setattr(topic, "partitions", before))

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self.topics[name]
        before, topic.configs = topic.configs, dict(configs)
        self._commit(lambda: setattr(topic, "configs", before))

    def _remove(self, topic: Topic) -> None:
        self.topics.pop(topic.name, None)
        self._by_id.pop(topic.topic_id, None)

    def _commit(self, undo: Callable[[], object]) -> None:
        """Save a change made in memory; undone when the store of record cannot save it."""
        try:
            self._save()
        except KafkaStorageError:
            undo()
            raise
