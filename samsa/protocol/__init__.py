"""The Kafka wire protocol: framing codec, response building, and the API table."""
