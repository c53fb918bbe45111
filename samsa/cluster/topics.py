"""Topic metadata of a single-node broker: names, ids, partition counts and config overrides.

Kept in ``<first log dir>/__samsa_topics.json`` (written atomically). In cluster mode the same
facts live in ZooKeeper instead.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from samsa.durable import write_atomically

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
    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / TOPICS_FILE
        self.topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        for t in data.get("topics", []):
            topic = Topic(
                t["name"], uuid.UUID(t["id"]), int(t["partitions"]), dict(t.get("configs", {})),
                bool(t.get("internal", False)),
            )
            self._add(topic)

    def _save(self) -> None:
        data = {
            "version": 1,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
                 "configs": t.configs, "internal": t.internal}
                for t in self.topics.values()
            ],
        }
        write_atomically(self.path, json.dumps(data, indent=1).encode())

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
        self._save()
        return topic

    def delete(self, name: str) -> Topic | None:
        topic = self.topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
            self._save()
        return topic

    def set_partitions(self, name: str, partitions: int) -> None:
        self.topics[name].partitions = partitions
        self._save()

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._save()
