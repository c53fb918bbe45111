"""ZooKeeper mode: Kafka's znodes, the broker's session and registration, the controller, and
the watches that turn the controller's partition states into leaders and followers here."""
