"""Import kio without its Hypothesis hooks.

When Hypothesis is installed (it is in the test extra), kio registers a Hypothesis strategy for
each of its primitive types at import time, which costs one to two seconds and creates a
``.hypothesis/`` folder in the working directory of every broker. The broker never uses those
strategies, so kio's hook module is imported while ``hypothesis`` is hidden from it. This module
must be imported before anything else imports kio (samsa/__init__.py does it first).
"""

from __future__ import annotations

import sys

if "kio.static._phantom" not in sys.modules:
    _hidden = ("hypothesis", "hypothesis.strategies")
    _saved = {name: sys.modules.get(name) for name in _hidden}
    for _name in _hidden:
        sys.modules[_name] = None  # type: ignore[assignment]  # makes the import fail
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        for _name, _module in _saved.items():
            if _module is None:
                del sys.modules[_name]
            else:
                sys.modules[_name] = _module
