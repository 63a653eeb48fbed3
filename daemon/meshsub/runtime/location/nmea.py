"""NMEA 0183 from a serial GNSS receiver (no gpsd): GGA, RMC and GSA via pynmea2.

Serial lines carry garbage at open, after a baud mismatch and when a USB
receiver resets; every bad line is counted, none stops the reader. The
device is reopened with back-off when it disappears.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import termios
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from meshsub.runtime.location.fix import Fix
from meshsub.runtime.logging import get_logger

if TYPE_CHECKING:  # imported by the first line fed: 1.6 MiB of idle RSS without NMEA
    import pynmea2

log = get_logger("meshsub.location.nmea")

BAUD_CONSTANTS: dict[int, int] = {
    rate: getattr(termios, f"B{rate}")
    for rate in (1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600)
    if hasattr(termios, f"B{rate}")
}
MAX_LINE = 256
"""NMEA allows 82 characters; anything much longer is noise."""


def _float(text: object) -> float | None:
    try:
        return float(str(text)) if str(text).strip() else None
    except ValueError:
        return None


def _int(text: object) -> int | None:
    try:
        return int(str(text)) if str(text).strip() else None
    except ValueError:
        return None


class NmeaAssembler:
    """Pure: sentences in, fixes out. A fix is emitted per GGA (or per RMC without GGA)."""

    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()
        self.gsa_mode: int | None = None
        self.gsa_hdop: float | None = None
        self.seen_gga = False

    def feed(self, line: str, now: float) -> Fix | None:
        import pynmea2

        line = line.strip()
        if not line:
            return None
        if not line.startswith(("$", "!")):
            self.counters["garbage"] += 1
            return None
        try:
            msg = pynmea2.parse(line, check=True)
        except pynmea2.ChecksumError:
            self.counters["checksum"] += 1
            return None
        except pynmea2.SentenceTypeError:
            self.counters["unknown_sentence"] += 1
            return None
        except (pynmea2.ParseError, ValueError, TypeError, AttributeError):
            self.counters["parse_error"] += 1
            return None
        kind = type(msg).__name__
        self.counters[kind.lower()] += 1
        try:
            if isinstance(msg, pynmea2.GSA):
                self.gsa_mode = _int(msg.mode_fix_type)
                self.gsa_hdop = _float(msg.hdop)
            elif isinstance(msg, pynmea2.GGA):
                self.seen_gga = True
                return self._gga(msg, now)
            elif isinstance(msg, pynmea2.RMC) and not self.seen_gga:
                return self._rmc(msg, now)
        except (ValueError, TypeError, AttributeError):
            self.counters["bad_field"] += 1
        return None

    def _lat_lon(self, msg: pynmea2.NMEASentence) -> tuple[float | None, float | None]:
        if not (msg.lat and msg.lon and msg.lat_dir in ("N", "S") and msg.lon_dir in ("E", "W")):
            return None, None
        lat, lon = float(msg.latitude), float(msg.longitude)
        if not (-90 <= lat <= 90 and -180 <= lon <= 180):
            self.counters["bad_coordinates"] += 1
            return None, None
        return lat, lon

    def _gga(self, msg: pynmea2.GGA, now: float) -> Fix:
        quality = _int(msg.gps_qual) or 0
        lat, lon = self._lat_lon(msg)
        alt = _float(msg.altitude)
        if quality == 0 or lat is None:
            mode = 1
        elif self.gsa_mode in (2, 3):
            mode = self.gsa_mode
        else:
            mode = 3 if alt is not None else 2
        hdop = _float(msg.horizontal_dil)
        return Fix(now, mode, lat, lon, alt if mode == 3 else None,
                   hdop if hdop is not None else self.gsa_hdop, _int(msg.num_sats))

    def _rmc(self, msg: pynmea2.RMC, now: float) -> Fix:
        lat, lon = self._lat_lon(msg)
        if msg.status != "A" or lat is None:
            mode = 1
        else:
            mode = self.gsa_mode if self.gsa_mode in (2, 3) else 2
        return Fix(now, mode or 1, lat, lon, None, self.gsa_hdop, None)


def configure_serial(fd: int, baud: int) -> None:
    """Raw 8N1 at ``baud``, receiver enabled, modem lines ignored."""
    speed = BAUD_CONSTANTS.get(baud)
    if speed is None:
        raise ValueError(f"unsupported baud rate {baud}")
    iflag, oflag, cflag, lflag, _ispeed, _ospeed, cc = termios.tcgetattr(fd)
    iflag &= ~(termios.IGNBRK | termios.BRKINT | termios.PARMRK | termios.ISTRIP
               | termios.INLCR | termios.IGNCR | termios.ICRNL | termios.IXON | termios.IXOFF)
    oflag &= ~termios.OPOST
    lflag &= ~(termios.ECHO | termios.ECHONL | termios.ICANON | termios.ISIG | termios.IEXTEN)
    cflag &= ~(termios.CSIZE | termios.PARENB | termios.CSTOPB)
    cflag |= termios.CS8 | termios.CREAD | termios.CLOCAL
    cc[termios.VMIN] = 1
    cc[termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSANOW, [iflag, oflag, cflag, lflag, speed, speed, cc])


class NmeaSerialSource:
    """Reads a serial device (or pseudo-terminal) and yields fixes; reopens on loss."""

    name = "nmea"

    def __init__(
        self,
        device: str,
        baud: int = 9600,
        *,
        clock: Callable[[], float],
        backoff_min: float = 1.0,
        backoff_max: float = 30.0,
    ) -> None:
        if baud not in BAUD_CONSTANTS:
            raise ValueError(f"unsupported baud rate {baud}")
        self.device, self.baud = device, baud
        self._clock = clock
        self.backoff_min, self.backoff_max = backoff_min, backoff_max
        self.assembler = NmeaAssembler()
        self.open = False
        self.opens = 0
        self.failures = 0
        self.last_error: str | None = None

    async def fixes(self) -> AsyncIterator[Fix]:
        delay = self.backoff_min
        loop = asyncio.get_running_loop()
        while True:
            try:
                fd = os.open(self.device, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
            except OSError as exc:
                self._failed(f"open: {exc.strerror or exc}", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff_max)
                continue
            queue: asyncio.Queue[Fix | BaseException] = asyncio.Queue()
            buffer = bytearray()

            def readable(fd: int = fd, queue: asyncio.Queue[Fix | BaseException] = queue,
                         buffer: bytearray = buffer) -> None:
                try:
                    chunk = os.read(fd, 4096)
                except BlockingIOError:
                    return
                except OSError as exc:
                    loop.remove_reader(fd)
                    queue.put_nowait(exc)
                    return
                if not chunk:
                    loop.remove_reader(fd)
                    queue.put_nowait(EOFError("device closed"))
                    return
                buffer.extend(chunk)
                while (end := buffer.find(b"\n")) >= 0:
                    raw = bytes(buffer[:end])
                    del buffer[:end + 1]
                    self._line(raw, queue)
                if len(buffer) > MAX_LINE:
                    self.assembler.counters["garbage"] += 1
                    buffer.clear()

            try:
                configure_serial(fd, self.baud)
                self.open = True
                self.opens += 1
                log.info("nmea device open", device=self.device, baud=self.baud)
                loop.add_reader(fd, readable)
                while True:
                    item = await queue.get()
                    if isinstance(item, BaseException):
                        raise item
                    delay = self.backoff_min
                    yield item
            except (OSError, EOFError, termios.error) as exc:
                self._failed(str(exc) or type(exc).__name__, delay)
            finally:
                self.open = False
                loop.remove_reader(fd)
                with contextlib.suppress(OSError):
                    os.close(fd)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff_max)

    def _line(self, raw: bytes, queue: asyncio.Queue[Fix | BaseException]) -> None:
        if len(raw) > MAX_LINE:
            self.assembler.counters["garbage"] += 1
            return
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            self.assembler.counters["garbage"] += 1
            return
        fix = self.assembler.feed(text, self._clock())
        if fix is not None:
            queue.put_nowait(fix)

    def _failed(self, error: str, delay: float) -> None:
        self.failures += 1
        self.last_error = error
        log.warning("nmea device unavailable", device=self.device, error=error,
                    retry_s=round(delay, 1))

    def status(self) -> dict[str, object]:
        return {
            "source": self.name,
            "device": self.device,
            "baud": self.baud,
            "connected": self.open,
            "opens": self.opens,
            "failures": self.failures,
            "last_error": self.last_error,
            "sentences": dict(self.assembler.counters),
        }
