"""samsa: Apache Kafka rebuilt in Python."""

from samsa import _kio_import  # noqa: F401  (first: keeps kio's import fast)
from samsa.embedded import Broker

__version__ = "0.1.0"

__all__ = ["Broker", "__version__"]
