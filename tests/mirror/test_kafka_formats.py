"""The internal topics' records are byte for byte what Kafka writes: the schemas of Kafka's
OffsetSync, Checkpoint and Heartbeat serialized by kafka-clients' own Struct (a small Java
program compiled here against kafka-clients of tests/reference's pinned release), beside
samsa's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import built

from samsa.tools.mirror_client import Checkpoint, Heartbeat, OffsetSync

SOURCE = Path(__file__).parent / "java" / "KafkaMirrorRecords.java"


def reference_classpath() -> str:
    """kafka-clients of the pinned reference release and what it needs (make reference)."""
    classpath = built.classpath(built.ROOT / "build" / "reference" / "classpath.txt",
                                "Kafka's Java client and tools (make reference)")
    assert "/kafka-clients-" in classpath, classpath
    return classpath


def test_records_match_kafkas_struct_serialization(tmp_path):
    jar = reference_classpath()
    subprocess.run(["javac", "-d", str(tmp_path), "-cp", jar, str(SOURCE)], check=True,
                   timeout=120)
    run = subprocess.run(["java", "-cp", f"{tmp_path}:{jar}", "KafkaMirrorRecords"],
                         capture_output=True, text=True, timeout=120, check=True)
    kafka = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    sync = OffsetSync("orders", 1, 99, 98)
    checkpoint = Checkpoint("app", "A.orders", 2, 130, 123, "m\u20ac")
    beat = Heartbeat("A", "B", 1_700_000_000_000)
    ours = {
        "offset_sync_key": sync.record_key(), "offset_sync_value": sync.record_value(),
        "checkpoint_key": checkpoint.record_key(), "checkpoint_value": checkpoint.record_value(),
        "heartbeat_key": beat.record_key(), "heartbeat_value": beat.record_value(),
    }
    assert {name: data.hex() for name, data in ours.items()} == kafka
    # and samsa reads Kafka's bytes back
    assert OffsetSync.deserialize(bytes.fromhex(kafka["offset_sync_key"]),
                                  bytes.fromhex(kafka["offset_sync_value"])) == sync
    assert Checkpoint.deserialize(bytes.fromhex(kafka["checkpoint_key"]),
                                  bytes.fromhex(kafka["checkpoint_value"])) == checkpoint
    assert Heartbeat.deserialize(bytes.fromhex(kafka["heartbeat_key"]),
                                 bytes.fromhex(kafka["heartbeat_value"])) == beat
