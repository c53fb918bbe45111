"""Cluster state: topics, partitions (and, in cluster mode, ZooKeeper and replication)."""
