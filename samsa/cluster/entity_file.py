"""A single node's entity configs in one JSON file of its metadata dir: what ZooKeeper's
``/config/<type>/<name>`` znodes hold in a cluster (SCRAM credentials, client quotas, dynamic
broker configs), as ``{"version": 1, "<section>": {"<entity>": {"<key>": "<value>"}}}``.

Written whole and atomically (a crash leaves the old file or the new one); an I/O error takes
the metadata dir offline, as any other of its files'.
"""

from __future__ import annotations

import json
from pathlib import Path

from samsa.durable import write_atomically
from samsa.errors import KafkaStorageError
from samsa.storage.log_dir_failure import LogDirFailureChannel

Entities = dict[str, dict[str, str]]  # entity -> its configs, as text


class EntityConfigFile:
    def __init__(self, directory: Path, name: str, section: str,
                 failures: LogDirFailureChannel | None = None, mode: int = 0o644) -> None:
        self.directory = Path(directory)
        self.name = name
        self.path = self.directory / name
        self.section = section
        self.mode = mode  # 0o600 for secrets (SCRAM salts and keys)
        self._failures = failures

    def _io_error(self, what: str, exc: OSError) -> KafkaStorageError:
        if self._failures is not None:
            self._failures.maybe_add_offline_log_dir(self.directory, f"{what} {self.name}", exc)
        return KafkaStorageError(f"I/O error {what} {self.path}: {exc}")

    def read(self) -> Entities:
        """Every entity's configs (none before the first write)."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise self._io_error("reading", exc) from exc
        except ValueError as exc:
            raise KafkaStorageError(f"{self.path} is not valid JSON: {exc}") from exc
        entities = data.get(self.section, {}) if isinstance(data, dict) else {}
        return {str(entity): {str(k): str(v) for k, v in config.items()}
                for entity, config in entities.items() if isinstance(config, dict)}

    def write(self, entities: Entities) -> None:
        """Replace the file with ``entities`` (an entity with no configs is left out)."""
        if self._failures is not None and self._failures.is_offline(self.directory):
            raise KafkaStorageError(f"the log dir {self.directory} of {self.name} is offline")
        data = {"version": 1, self.section: {e: c for e, c in entities.items() if c}}
        try:
            write_atomically(self.path, json.dumps(data, indent=1, sort_keys=True).encode(),
                             mode=self.mode)
        except OSError as exc:
            raise self._io_error("writing", exc) from exc
