"""Kafka's command-line tools as ``samsa`` subcommands, built on confluent-kafka.

``samsa topics`` (kafka-topics.sh), ``samsa configs`` (kafka-configs.sh), ``samsa produce``
(kafka-console-producer.sh) and ``samsa consume`` (kafka-console-consumer.sh).
"""

from __future__ import annotations

import click

from samsa.tools.configs import configs
from samsa.tools.console import consume, produce
from samsa.tools.topics import topics

COMMANDS: tuple[click.Command, ...] = (topics, configs, produce, consume)

__all__ = ["COMMANDS", "configs", "consume", "produce", "topics"]
