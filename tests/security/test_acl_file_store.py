"""A single node's ACL file (samsa/cluster/acls.FileAclStore): written before the authorizer
changes, so a failed write changes nothing but takes the metadata dir offline (the broker then
halts, as for its topics); a file it cannot read stops the start."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from samsa.cluster.acls import ACLS_FILE, FileAclStore
from samsa.errors import ErrorCode, KafkaStorageError
from samsa.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from samsa.security.authorizer import AclAuthorizer
from samsa.storage.log_dir_failure import LogDirFailureChannel

READ = AclBinding(ResourcePattern(ResourceType.TOPIC, "t"), AccessControlEntry(
    "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))
WRITE = AclBinding(ResourcePattern(ResourceType.TOPIC, "t"), AccessControlEntry(
    "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW))


def test_a_failed_write_changes_nothing_and_takes_the_dir_offline(tmp_path: Path) -> None:
    failures = LogDirFailureChannel()
    store = FileAclStore(AclAuthorizer(), tmp_path, failures)
    asyncio.run(store.start())
    assert asyncio.run(store.create([READ])) == [None]
    (tmp_path / (ACLS_FILE + ".tmp")).mkdir()  # where the temporary file goes: writes fail
    errors = asyncio.run(store.create([WRITE]))
    assert [e.code if e else None for e in errors] == [ErrorCode.kafka_storage_error]
    assert failures.is_offline(tmp_path)
    assert store.authorizer.acls() == [READ]
    (deleted,) = asyncio.run(store.delete([AclBindingFilter()]))
    assert deleted.error is not None and deleted.error.code == ErrorCode.kafka_storage_error
    assert store.authorizer.acls() == [READ]


def test_an_unreadable_file_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / ACLS_FILE).write_text('{"version": 7}')
    with pytest.raises(KafkaStorageError, match="cannot read the ACLs"):
        asyncio.run(FileAclStore(AclAuthorizer(), tmp_path).start())
