"""What the fuzz targets share: atheris's entry point, imported only when a target runs as a
script, so the tests replay each target's ``check(data)`` without atheris installed.

A target module is ``check(data: bytes) -> None``, which returns for every input the code
handles as designed (an answer, a clean Kafka error, MalformedRequestError,
CorruptRecordError, ...) and raises anything else: the fuzzer reports that as a crash and
writes the input to ``crash-<sha1>``. Run one as

    python fuzz/fuzz_records.py tests/fuzz_corpus/records -runs=100000

with any of libFuzzer's flags (-max_total_time, -merge=1, -jobs, ...).
"""

from __future__ import annotations

import gc
import os
import shlex
import sys
import types
from collections.abc import Callable


def _samsa_functions() -> list[types.FunctionType]:
    """Every function of samsa loaded so far (the request guard's generated code too)."""
    return [
        obj for obj in gc.get_objects()
        if isinstance(obj, types.FunctionType)
        and ((obj.__module__ or "").startswith("samsa")
             or obj.__code__.co_filename.startswith(("<guard", "<null check")))
    ]


Mutator = Callable[[bytes, int, int], bytes]


def fuzz(check: Callable[[bytes], None],
         mutator: Callable[[Callable[[bytes, int], bytes]], Mutator] | None = None) -> None:
    """Instrument samsa's code for coverage and let libFuzzer drive ``check``.

    Only samsa is instrumented: the libraries (kio's native reader, cramjam, crc32c) are
    native code, and instrumenting all of Python's loaded code takes minutes on a busy
    machine for little guidance. ``mutator``, given libFuzzer's own byte mutation, returns a
    custom mutator (data, max_size, seed) -> data."""
    import atheris  # the fuzz extra: pip install -e '.[fuzz]'

    functions = _samsa_functions()
    for function in functions:
        atheris.instrument_func(function)
    print(f"INFO: instrumented {len(functions)} samsa functions", file=sys.stderr)
    # libFuzzer runs argv[0] through the shell for -merge, -fork and -jobs: make it this
    # interpreter running this script (the scripts are not executables)
    argv = [f"{shlex.quote(sys.executable)} {shlex.quote(os.path.abspath(sys.argv[0]))}",
            *sys.argv[1:]]
    if mutator is None:
        atheris.Setup(argv, check)
    else:
        # atheris.Mutate is bound to libFuzzer once Fuzz() runs: look it up at each call
        atheris.Setup(argv, check, custom_mutator=mutator(
            lambda data, max_size: atheris.Mutate(data, max_size)))
    atheris.Fuzz()
