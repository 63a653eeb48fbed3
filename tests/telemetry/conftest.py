"""One Spark session per test session: starting Spark costs seconds to a minute."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    pytest.importorskip("pyspark")
    from mesheval.session import get_session

    session = get_session("local[2]")
    yield session
    session.stop()
