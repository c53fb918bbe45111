"""The web console (``samsa ui``): a Kafka client that shows a cluster in a browser."""
