"""mm2.properties as Kafka's docs write it, MM2's defaults and precedence, and one-line errors
for bad configs (the parser, and ``samsa mirror`` itself)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from samsa.mirror.config import MirrorConfigError, MirrorMakerConfig, SourceAndTarget
from samsa.mirror.topics import TopicFilter
from samsa.tools.mirror_client import DefaultReplicationPolicy, IdentityReplicationPolicy

# connect-mirror-maker.properties as shipped with Kafka (config/), comments and all
KAFKA_EXAMPLE = """\
# specify any number of cluster aliases
clusters = A, B

# connection information for each cluster
# This is a comma separated host:port pairs for each cluster
# for e.g. "A_host1:9092, A_host2:9092, A_host3:9092"
A.bootstrap.servers = A_host1:9092, A_host2:9092, A_host3:9092
B.bootstrap.servers = B_host1:9092, B_host2:9092, B_host3:9092

# enable and configure individual replication flows
A->B.enabled = true

# regex which defines which topics gets replicated. For eg "foo-.*"
A->B.topics = .*

B->A.enabled = true
B->A.topics = .*

# Setting replication factor of newly created remote topics
replication.factor=1

############################# Internal Topic Settings  #############################
checkpoints.topic.replication.factor=1
heartbeats.topic.replication.factor=1
offset-syncs.topic.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
config.storage.replication.factor=1
"""

# the docs' "Configuring Geo-Replication" example
DOCS_EXAMPLE = """\
clusters = primary, secondary
primary.bootstrap.servers = broker3-primary:9092
secondary.bootstrap.servers = broker3-secondary:9092
primary->secondary.enabled = true
primary->secondary.topics = foobar-topic, quux-.*
secondary.producer.acks = all
primary.consumer.max.poll.records = 500
"""


def parse(text: str) -> MirrorMakerConfig:
    from samsa.config import parse_properties

    return MirrorMakerConfig(parse_properties(text.splitlines()))


def test_kafka_shipped_example():
    config = parse(KAFKA_EXAMPLE)
    assert config.clusters == ["A", "B"]
    assert [str(f) for f in config.flows()] == ["A->B", "B->A"]
    ab = SourceAndTarget("A", "B")
    assert config.get_int(ab, "replication.factor") == 1
    assert config.get_int(ab, "offset-syncs.topic.replication.factor") == 1
    # MM2's defaults
    assert config.get_int(ab, "emit.checkpoints.interval.seconds") == 60
    assert config.get_int(ab, "emit.heartbeats.interval.seconds") == 1
    assert config.get_int(ab, "refresh.topics.interval.seconds") == 600
    assert config.get_bool(ab, "sync.group.offsets.enabled") is False
    assert config.get_bool(ab, "sync.topic.configs.enabled") is True
    assert config.get(ab, "offset-syncs.topic.location") == "source"
    assert config.exactly_once(ab) is False
    assert config.client_config("A", "producer")["bootstrap.servers"] == (
        "A_host1:9092, A_host2:9092, A_host3:9092")


def test_docs_example_topics_and_client_configs():
    config = parse(DOCS_EXAMPLE)
    flow = SourceAndTarget("primary", "secondary")
    assert config.flows() == [flow]
    f = TopicFilter.of(config, flow)
    assert f.should_replicate("foobar-topic") and f.should_replicate("quux-1")
    assert not f.should_replicate("foobar-topic2") and not f.should_replicate("other")
    assert f.should_replicate("heartbeats")  # heartbeats.replication.enabled
    assert f.remote_topic("quux-1") == "primary.quux-1"
    assert config.client_config("secondary", "producer")["acks"] == "all"
    assert "acks" not in config.client_config("secondary", "consumer")
    assert config.client_config("primary", "consumer")["max.poll.records"] == "500"
    # all pairs emit heartbeats by default, enabled or not
    assert {str(p) for p in config.heartbeat_pairs()} == {"primary->secondary",
                                                          "secondary->primary"}


def test_precedence_defaults_and_blacklist():
    config = parse("clusters = A, B, C\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
                   "C.bootstrap.servers = h:3\nA->B.enabled = true\nA->C.enabled = true\n"
                   "topics = t.*\nA->C.topics = c.*\ntopics.blacklist = t-secret\n"
                   "A->B.emit.checkpoints.interval.seconds = 5\n")
    ab, ac = SourceAndTarget("A", "B"), SourceAndTarget("A", "C")
    assert config.get(ab, "topics") == "t.*" and config.get(ac, "topics") == "c.*"
    assert config.get_int(ab, "emit.checkpoints.interval.seconds") == 5
    assert config.get_int(ac, "emit.checkpoints.interval.seconds") == 60
    f = TopicFilter.of(config, ab)
    assert f.should_replicate("t1") and not f.should_replicate("t-secret")
    # MM2's default exclusions: internal topics, and cycles (C.x came from... C, not B)
    assert not f.should_replicate("__consumer_offsets")
    assert not f.should_replicate("mm2-offset-syncs.B.internal")
    assert not f.should_replicate("tB.internal")


def test_replication_policies():
    d = DefaultReplicationPolicy()
    assert d.format_remote_topic("us-west", "topic1") == "us-west.topic1"
    assert d.topic_source("us-west.topic1") == "us-west"
    assert d.upstream_topic("us-west.topic1") == "topic1"
    assert d.topic_source("topic1") is None
    assert d.original_topic("us-east.us-west.topic1") == "topic1"
    assert d.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert d.checkpoints_topic("A") == "A.checkpoints.internal"
    assert d.is_heartbeats_topic("A.B.heartbeats") and not d.is_heartbeats_topic("x")
    assert d.is_internal_topic("__consumer_offsets") and d.is_internal_topic("x-internal")
    custom = DefaultReplicationPolicy(separator="_")
    assert custom.format_remote_topic("A", "t") == "A_t"
    assert custom.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"
    assert custom.checkpoints_topic("A") == "A_checkpoints_internal"
    identity = IdentityReplicationPolicy(source_cluster_alias="A")
    assert identity.format_remote_topic("A", "t") == "t"
    assert identity.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert identity.topic_source("t") == "A" and identity.upstream_topic("t") == "t"
    config = parse("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
                   "A->B.enabled = true\nreplication.policy.class = "
                   "org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n")
    assert TopicFilter.of(config, SourceAndTarget("A", "B")).remote_topic("t") == "t"


def test_cycles_detected():
    config = parse("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
                   "A->B.enabled = true\nB->A.enabled = true\n")
    ab = TopicFilter.of(config, SourceAndTarget("A", "B"))
    assert ab.should_replicate("t") and ab.should_replicate("C.t")
    assert not ab.should_replicate("B.t") and not ab.should_replicate("C.B.t")
    assert not ab.should_replicate("B.heartbeats") and ab.should_replicate("heartbeats")


BAD = [
    ("", "clusters: missing"),
    ("clusters = A, B\nA.bootstrap.servers = h:1\n", "B.bootstrap.servers: missing"),
    ("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
     "A->C.enabled = true\n", "A->C.enabled: 'C' is not one of the clusters"),
    ("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
     "A->B.enabled = yes\n", "A->B.enabled: expected true or false, got 'yes'"),
    ("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
     "A->B.enabled = true\nA->B.topics = (unclosed\n", "A->B.topics: bad regex"),
    ("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
     "A->B.enabled = true\nemit.checkpoints.interval.seconds = soon\n",
     "emit.checkpoints.interval.seconds: expected an integer, got 'soon'"),
    ("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
     "A->B.enabled = true\nexactly.once.support = always\n",
     "exactly.once.support: expected one of enabled, required, requested, disabled, got "
     "'always'"),
    ("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
     "A->B.enabled = true\nB.exactly.once.source.support = yes\n",
     "B.exactly.once.source.support: expected one of enabled, preparing, disabled, got 'yes'"),
    ("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
     "A->B.enabled = true\nreplication.policy.class = com.example.MyPolicy\n",
     "replication.policy.class: unknown class 'com.example.MyPolicy'"),
    ("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
     "A->B.enabled = true\noffset-syncs.topic.location = elsewhere\n",
     "offset-syncs.topic.location: expected source or target"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_configs_name_the_key(text, message):
    with pytest.raises(MirrorConfigError, match="^" + message.replace("(", r"\(")):
        parse(text)


def test_samsa_mirror_reports_bad_config_in_one_line(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text(BAD[3][0])
    run = subprocess.run([sys.executable, "-m", "samsa.cli", "mirror", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        f"samsa: {path}: A->B.enabled: expected true or false, got 'yes'"]
    path.write_text("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n")
    run = subprocess.run([sys.executable, "-m", "samsa.cli", "mirror", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and len(run.stderr.strip().splitlines()) == 1
    assert "no flow is enabled" in run.stderr
    run = subprocess.run([sys.executable, "-m", "samsa.cli", "mirror", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "no such properties file" in run.stderr


def test_samsa_mirror_unreachable_cluster_is_one_line(tmp_path):
    import socket

    with socket.socket() as free:  # a port nobody listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    path = tmp_path / "mm2.properties"
    path.write_text(f"clusters = A, B\nA.bootstrap.servers = 127.0.0.1:{port}\n"
                    f"B.bootstrap.servers = 127.0.0.1:{port}\nA->B.enabled = true\n")
    run = subprocess.run([sys.executable, "-m", "samsa.cli", "mirror", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"samsa: cluster A: cannot connect to any bootstrap server: 127.0.0.1:{port}"), lines


def test_exactly_once_keys():
    base = ("clusters = us-west, us-east\nus-west.bootstrap.servers = h:1\n"
            "us-east.bootstrap.servers = h:2\nus-west->us-east.enabled = true\n"
            "us-east->us-west.enabled = true\n")
    west_east = SourceAndTarget("us-west", "us-east")
    east_west = SourceAndTarget("us-east", "us-west")
    assert not parse(base).exactly_once(west_east)
    # Kafka's docs (geo-replication, exactly once): per target cluster
    config = parse(base + "us-east.exactly.once.source.support = enabled\n"
                   "us-west.consumer.isolation.level = read_committed\n")
    assert config.exactly_once(west_east) and not config.exactly_once(east_west)
    assert config.client_config("us-west", "consumer")["isolation.level"] == "read_committed"
    assert not parse(base + "exactly.once.source.support = preparing\n").exactly_once(west_east)
    assert parse(base + "exactly.once.support = enabled\n").exactly_once(east_west)
    assert parse(base + "us-east->us-west.exactly.once.support = required\n").exactly_once(
        east_west)
    assert not parse(base + "exactly.once.support = requested\n").exactly_once(east_west)
