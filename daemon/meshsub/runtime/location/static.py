"""The configured position: one exact fix, repeated so max-age re-announces work."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from meshsub.runtime.location.fix import Fix


class StaticSource:
    """Yields the configured coordinates (WGS84 or local metres) every ``period`` s."""

    name = "static"

    def __init__(
        self,
        *,
        lat: float | None = None,
        lon: float | None = None,
        alt: float = 0.0,
        local: tuple[float, float, float] | None = None,
        clock: Callable[[], float],
        period: float = 30.0,
    ) -> None:
        if local is None and (lat is None or lon is None):
            raise ValueError("a static source needs lat/lon or local x/y/z")
        self._lat, self._lon, self._alt, self._local = lat, lon, alt, local
        self._clock = clock
        self._period = period
        self.yielded = 0

    def fix(self) -> Fix:
        return Fix(
            received_at=self._clock(),
            mode=3,
            lat=self._lat,
            lon=self._lon,
            alt=self._alt,
            hdop=0.0,
            satellites=None,
            local=self._local,
            static=True,
        )

    async def fixes(self) -> AsyncIterator[Fix]:
        while True:
            self.yielded += 1
            yield self.fix()
            await asyncio.sleep(self._period)

    def status(self) -> dict[str, object]:
        return {"source": self.name, "connected": True, "fixes": self.yielded}
