"""Kafka's command-line tools as ``samsa`` subcommands, built on confluent-kafka.

``samsa topics`` (kafka-topics.sh), ``samsa configs`` (kafka-configs.sh), ``samsa produce``
(kafka-console-producer.sh), ``samsa consume`` (kafka-console-consumer.sh), ``samsa groups``
(kafka-consumer-groups.sh), ``samsa transactions`` (kafka-transactions.sh), ``samsa
reassign-partitions`` (kafka-reassign-partitions.sh), ``samsa leader-election``
(kafka-leader-election.sh), and ``samsa cluster up|down``: a local ZooKeeper and N brokers for
trying a cluster on one machine.
"""

from __future__ import annotations

import click

from samsa.tools.cluster import cluster
from samsa.tools.configs import configs
from samsa.tools.console import consume, produce
from samsa.tools.groups import groups
from samsa.tools.leader_election import leader_election
from samsa.tools.reassign_partitions import reassign_partitions
from samsa.tools.topics import topics
from samsa.tools.transactions import transactions

COMMANDS: tuple[click.Command, ...] = (
    topics, configs, produce, consume, groups, transactions, reassign_partitions,
    leader_election, cluster,
)

__all__ = [
    "COMMANDS", "cluster", "configs", "consume", "groups", "leader_election", "produce",
    "reassign_partitions", "topics", "transactions",
]
