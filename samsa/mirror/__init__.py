"""MirrorMaker 2 in samsa: ``samsa mirror mm2.properties`` replicates topics between clusters
as Kafka's connect-mirror-maker.sh does, with MM2's config keys, remote topic names, internal
topics (offset syncs, checkpoints, heartbeats; Kafka's binary formats) and offset translation.

- ``config``: mm2.properties (MirrorMakerConfig); ``topics``: selection and topic sync;
- ``source``: the copy loop; ``offset_store``: its progress, in the target;
- ``offset_syncs``: when syncs are emitted and how offsets translate;
- ``checkpoint``: checkpoints and group offset sync; ``heartbeat``: heartbeats;
- ``runner``: all of them in one process; ``cli``: the command.

The replication policies and the internal records are Kafka's mirror-client, in
``samsa.tools.mirror_client``.
"""
