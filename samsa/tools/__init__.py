"""Kafka's command-line tools as ``samsa`` subcommands, built on confluent-kafka.

``samsa topics`` (kafka-topics.sh), ``samsa configs`` (kafka-configs.sh), ``samsa produce``
(kafka-console-producer.sh), ``samsa consume`` (kafka-console-consumer.sh), ``samsa groups``
(kafka-consumer-groups.sh), ``samsa transactions`` (kafka-transactions.sh), ``samsa
reassign-partitions`` (kafka-reassign-partitions.sh), ``samsa leader-election``
(kafka-leader-election.sh), and ``samsa cluster up|down``: a local ZooKeeper and N brokers for
trying a cluster on one machine.
"""

from __future__ import annotations
