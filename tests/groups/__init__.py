"""Consumer groups end to end: real clients (confluent-kafka, kafka-python, aiokafka), each
member its own OS process (member.py), against samsa's group coordinator."""
