"""Log compaction end to end: real clients over loopback TCP against a broker whose log cleaner
runs (``log.cleaner.backoff.ms`` small), checked through what consumers read and what is on
disk."""
