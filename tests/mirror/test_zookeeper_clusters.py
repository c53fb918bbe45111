"""Mirroring between ZooKeeper-mode clusters of broker processes (tests/cluster's
ProcessCluster): a one-broker source into a two-broker target, with MM2's default
replication.factor of 2 for the remote topic."""

from __future__ import annotations

from cluster.processes import process_cluster
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.mirror.config import MirrorMakerConfig
from samsa.mirror.runner import MirrorMaker

from .helpers import FAST, produce, read_all


class _Cluster:
    """What helpers.produce / read_all need of a cluster: its bootstrap servers."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap_servers = bootstrap


def test_mirror_between_zookeeper_clusters(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    with process_cluster(tmp_path / "src", 1) as src, process_cluster(tmp_path / "dst", 2) as dst:
        source, target = _Cluster(src.bootstrap), _Cluster(dst.bootstrap)
        src.admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(30)
        produce(source, "orders", [{"key": str(i).encode(), "value": b"v", "partition": i % 3}
                                   for i in range(90)])
        props = {"clusters": "src, dst", "src.bootstrap.servers": src.bootstrap,
                 "dst.bootstrap.servers": dst.bootstrap, "src->dst.enabled": "true",
                 **FAST}
        del props["replication.factor"]  # MM2's default: 2
        maker = MirrorMaker(MirrorMakerConfig(props))
        maker.start()
        try:
            assert maker.wait_ready(60), maker.failure()
            copied = read_all(target, "src.orders", expected=90, timeout=60)
        finally:
            maker.stop()
        assert maker.failure() is None, maker.failure()
        assert sorted(int(m.key()) for m in copied) == list(range(90))
        md = AdminClient({"bootstrap.servers": dst.bootstrap}).list_topics(timeout=30)
        assert [len(p.replicas) for p in md.topics["src.orders"].partitions.values()] == [2] * 3
