"""samsa: Apache Kafka rebuilt in Python."""

__version__ = "0.1.0"
