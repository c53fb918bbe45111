"""samsa: Apache Kafka rebuilt in Python.

``samsa.Broker`` is imported on first use, so that ``import samsa.spark`` (on a Spark executor)
or ``import samsa.pipeline`` brings in no broker code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa import _kio_import  # noqa: F401  (first: keeps kio's import fast)

if TYPE_CHECKING:
    from samsa.embedded import Broker

__version__ = "0.1.0"

__all__ = ["Broker", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from samsa.embedded import Broker

        return Broker
    raise AttributeError(f"module 'samsa' has no attribute {name!r}")
