"""The on-disk partition log: segments, indexes, recovery, retention."""

from samsa.storage.log import AppendInfo, FileRegion, Log, TimestampOffset
from samsa.storage.manager import LogManager

__all__ = ["AppendInfo", "FileRegion", "Log", "LogManager", "TimestampOffset"]
