"""A real broker for the pipeline's tests (helpers: ``tests/pipeline_data.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import samsa


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path_factory.mktemp("pipeline-broker") / "data") as b:
        yield b

