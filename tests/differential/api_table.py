"""docs/compatibility.md's generated parts: the table of every API key Apache Kafka or samsa
advertises, with both version ranges (from the two brokers' ApiVersions answers), and the lists
of differences (differences.py).

    cd tests && ../.venv/bin/python -m differential.api_table

starts both brokers (as the tests do) and rewrites those parts of the document;
test_against_kafka.py checks that they match.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from kafka_frames import FrameClient

from .brokers import ROOT, kafka_broker, samsa_broker
from .differences import DELIBERATE, Difference

DOC = ROOT / "docs" / "compatibility.md"
KAFKA_VERSION = "4.4.0"

# Kafka's names of its API keys (org.apache.kafka.common.protocol.ApiKeys, 4.4.0)
NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    27: "WriteTxnMarkers",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    38: "CreateDelegationToken",
    39: "RenewDelegationToken",
    40: "ExpireDelegationToken",
    41: "DescribeDelegationToken",
    42: "DeleteGroups",
    43: "ElectLeaders",
    44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments",
    47: "OffsetDelete",
    48: "DescribeClientQuotas",
    49: "AlterClientQuotas",
    50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials",
    52: "Vote",
    53: "BeginQuorumEpoch",
    54: "EndQuorumEpoch",
    55: "DescribeQuorum",
    56: "AlterPartition",
    57: "UpdateFeatures",
    58: "Envelope",
    59: "FetchSnapshot",
    60: "DescribeCluster",
    61: "DescribeProducers",
    62: "BrokerRegistration",
    63: "BrokerHeartbeat",
    64: "UnregisterBroker",
    65: "DescribeTransactions",
    66: "ListTransactions",
    67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    70: "ControllerRegistration",
    71: "GetTelemetrySubscriptions",
    72: "PushTelemetry",
    73: "AssignReplicasToDirs",
    74: "ListConfigResources",
    75: "DescribeTopicPartitions",
    76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe",
    78: "ShareFetch",
    79: "ShareAcknowledge",
    80: "AddRaftVoter",
    81: "RemoveRaftVoter",
    82: "UpdateRaftVoter",
    83: "InitializeShareGroupState",
    84: "ReadShareGroupState",
    85: "WriteShareGroupState",
    86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary",
    88: "StreamsGroupHeartbeat",
    89: "StreamsGroupDescribe",
    90: "DescribeShareGroupOffsets",
    91: "AlterShareGroupOffsets",
    92: "DeleteShareGroupOffsets",
    93: "StreamsGroupTopologyDescriptionUpdate",
    94: "UnregisterController",
}

_KRAFT = "KRaft's metadata quorum: samsa is one node or a ZooKeeper cluster, it has none"
_SHARE = "share groups (KIP-932): not in samsa"
_STREAMS = "streams groups (KIP-1071): not in samsa"
_TOKENS = "delegation tokens: not in samsa"
_KIP890 = ("samsa serves transactions version 1: it finalizes no transaction.version feature, "
           "so Kafka 4 clients do not send transactions version 2 (KIP-890 part 2)")

# What a row's difference is, where the versions differ.
NOTES: dict[int, str] = {
    0: "both advertise v0-v2 and refuse them (KAFKA-18659); " + _KIP890,
    24: "v4 and later are Kafka's broker-to-broker versions (transaction verification)",
    26: _KIP890,
    38: _TOKENS, 39: _TOKENS, 40: _TOKENS, 41: _TOKENS,
    55: _KRAFT, 64: _KRAFT, 80: _KRAFT, 81: _KRAFT, 94: _KRAFT,
    57: "samsa has no feature flags to update (it finalizes none)",
    74: "config resources of client metrics and groups (KIP-1142): not in samsa",
    75: "not in samsa: Kafka's clients describe topics with Metadata instead",
    76: _SHARE, 77: _SHARE, 78: _SHARE, 79: _SHARE, 83: _SHARE, 84: _SHARE, 85: _SHARE,
    86: _SHARE, 87: _SHARE, 90: _SHARE, 91: _SHARE, 92: _SHARE,
    88: _STREAMS, 89: _STREAMS, 93: _STREAMS,
}

Versions = dict[int, tuple[int, int]]


def advertised(address: str) -> Versions:
    """The API keys and version ranges a broker advertises (ApiVersions v3)."""
    with FrameClient(address) as client:
        response = client.request(18, 3, {"client_software_name": "samsa-differential",
                                          "client_software_version": "1"})
    assert response.error_code == 0, response
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def _range(versions: Versions, key: int) -> str:
    if key not in versions:
        return "-"
    low, high = versions[key]
    return f"{low}" if low == high else f"{low}-{high}"


def table(kafka: Versions, samsa: Versions) -> str:
    rows = [f"| Key | API | Kafka {KAFKA_VERSION} | samsa | Notes |", "|---:|---|---|---|---|"]
    for key in sorted(set(kafka) | set(samsa)):
        rows.append(f"| {key} | {NAMES.get(key, '?')} | {_range(kafka, key)} | "
                    f"{_range(samsa, key)} | {NOTES.get(key, '')} |")
    return "".join(f"{row}\n" for row in rows)


def _listed(differences: dict[tuple[str, str], Difference]) -> str:
    """One item per reason, with the steps (scenario: step) it explains."""
    steps: dict[str, list[str]] = {}
    for (scenario, step), d in differences.items():
        steps.setdefault(d.reason, []).append(f"{scenario}: {step}")
    return "".join(f"- **{'; '.join(where)}.** {reason}\n" for reason, where in steps.items())


def generated(kafka: Versions, samsa: Versions) -> dict[str, str]:
    """The document's generated parts, by marker name."""
    return {"api-table": table(kafka, samsa), "deliberate": _listed(DELIBERATE)}


def _marked(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- generated: {name} -->\n)(.*?)(<!-- end: {name} -->)", re.S)


def parts(text: str) -> dict[str, str]:
    """The generated parts found in the document's text."""
    found = {}
    for name in ("api-table", "deliberate"):
        match = _marked(name).search(text)
        assert match is not None, f"docs/compatibility.md has no generated part {name!r}"
        found[name] = match.group(2)
    return found


def rewrite(text: str, new: dict[str, str]) -> str:
    for name, body in new.items():
        match = _marked(name).search(text)
        assert match is not None, f"docs/compatibility.md has no generated part {name!r}"
        text = text[:match.start(2)] + body + text[match.end(2):]
    return text


def main() -> None:
    with (tempfile.TemporaryDirectory(prefix="samsa-differential-") as tmp,
          kafka_broker(Path(tmp) / "kafka") as kafka, samsa_broker(Path(tmp)) as samsa):
        new = generated(advertised(kafka), advertised(samsa))
    DOC.write_text(rewrite(DOC.read_text(), new))
    print(f"rewrote {DOC}")


if __name__ == "__main__":
    main()
