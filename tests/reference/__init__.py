"""Kafka's own Java client and command-line tools against samsa."""
