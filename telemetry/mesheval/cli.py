"""``mesheval``: evaluate runs (batch), follow a spool (streaming), or collect live telemetry.

    mesheval RUNDIR... --out REPORTDIR [--master URL] [--warmup S] [--window S] [--range M]
    mesheval --follow SPOOLDIR --out REPORTDIR [--once] [--master URL]
    mesheval collect --broker HOST:PORT --topic T --spool DIR
    mesheval map RUNDIR | mesheval map --broker HOST:PORT   (docs/operations.md)

Bad arguments or unusable inputs print one line and exit with status 2; a failure
inside Spark prints one line and exits with status 1.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse that answers bad input with one line (and status 2), not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more: {text!r}")
    return value


def _memory(text: str) -> str:
    import re

    if not re.fullmatch(r"[1-9][0-9]*[kmgt]", text.lower()):
        raise argparse.ArgumentTypeError(f"expected a size such as 8g, not {text!r}")
    return text.lower()


def _bits(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of bits: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of bits: {text!r}")
    return value


def eval_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="mesheval",
        description="Evaluate meshsub telemetry: delivery ratio, latency, overhead, false "
        "positives, duplicates and energy per protocol, with 95%% CIs over seeds. "
        "'mesheval collect --help' for the live collector; 'mesheval page --help' writes "
        "a results page again from an earlier evaluation.",
    )
    p.add_argument("rundirs", nargs="*", type=Path, metavar="RUNDIR",
                   help="run directories (*.jsonl and *.parquet read recursively, manifest.json)")
    p.add_argument("--out", type=Path, metavar="REPORTDIR",
                   help="where metrics.json, report.md/html, plots and the Parquet cache go "
                   "(default for a sweep directory: DIR/eval)")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="a sweep directory: evaluate only the points whose id contains TEXT "
                        "(repeatable: any of them)")
    p.add_argument("--seeds", type=int, metavar="N",
                   help="a sweep directory: evaluate only the first N seeds of every block")
    p.add_argument("--claims", type=Path, metavar="CLAIMS.toml",
                   help="judge a paper's claims on the figures and write the results page "
                   "(docs/experiments.md)")
    p.add_argument("--master", help="Spark master URL (default local[2], or spark-submit's)")
    p.add_argument("--driver-memory", metavar="SIZE", type=_memory,
                   help="memory of a local Spark driver, e.g. 8g (default: 2g plus three "
                   "times the telemetry's size, at most half the machine's memory)")
    p.add_argument("--warmup", type=_non_negative, metavar="S",
                   help="exclude events published in the first S seconds (overrides the "
                   "manifest's scenario.warmup_s)")
    p.add_argument("--window", type=_positive, default=10.0, metavar="S",
                   help="tumbling window of the delivery-ratio time series (default 10)")
    p.add_argument("--range", dest="range_m", type=_positive, default=100.0, metavar="M",
                   help="radio range for the energy model when the manifest has none "
                   "(default 100)")
    p.add_argument("--cache-window", type=_non_negative, default=0.0, metavar="S",
                   help="a subscription starting up to S seconds after a publication still "
                   "counts as interested in it (protocols that serve publications from a "
                   "cache; latency from the subscription); default 0")
    p.add_argument("--message-bits", type=_bits, metavar="N",
                   help="energy: charge every transmission as a message of N bits instead of "
                   "its frame's bytes (HESPER's Table 4.1: M_b = 320)")
    p.add_argument("--deadline", type=_positive, metavar="S",
                   help="an event's lifetime: deliveries later than S after the publish do "
                   "not count, events whose deadline falls after the run are not judged "
                   "(overrides the manifest's evaluate.deadline_s)")
    p.add_argument("--no-optimum", action="store_true",
                   help="skip the optimum (fewest transmissions) and path stretch per event")
    p.add_argument("--follow", type=Path, metavar="SPOOLDIR",
                   help="streaming mode over a JSON Lines spool directory")
    p.add_argument("--once", action="store_true",
                   help="with --follow: process what is there and stop (availableNow)")
    p.add_argument("--interval", type=_positive, default=10.0, metavar="S",
                   help="with --follow: trigger and summary interval (default 10)")
    p.add_argument("--ttl", type=_positive, default=300.0, metavar="S",
                   help="with --follow: longest publish-to-deliver delay joined (default 300)")
    p.add_argument("--no-report", action="store_true", help="metrics.json and tables only")
    return p


def _first_line(exc: BaseException) -> str:
    """The cause's first line: a JVM failure's message, not its stack trace."""
    text = str(getattr(exc, "java_exception", None) or exc).strip()
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("at "):
            return line.strip()[:300]
    return type(exc).__name__


def _fail(message: str, status: int) -> int:
    print(f"mesheval: error: {message}", file=sys.stderr)
    return status


def eval_main(argv: Sequence[str]) -> int:
    args = eval_parser().parse_args(argv)
    if not args.rundirs and args.follow is None:
        return _fail("give at least one RUNDIR, or --follow SPOOLDIR", 2)
    if args.rundirs and args.follow is not None:
        return _fail("give RUNDIRs or --follow, not both", 2)
    for rundir in args.rundirs:
        if not rundir.is_dir():
            return _fail(f"{rundir}: not a directory", 2)
    from mesheval.sweep import SweepInputError, sweep_inputs

    try:
        if args.seeds is not None and args.seeds < 1:
            raise SweepInputError("--seeds must be at least 1")
        sweep = sweep_inputs(args.rundirs, args.only, args.seeds)
        if sweep is None and (args.only or args.seeds is not None):
            raise SweepInputError("--only and --seeds need a sweep directory")
    except SweepInputError as exc:
        return _fail(str(exc), 2)
    args.sweep_document = sweep.document if sweep is not None else None
    if sweep is not None:
        args.rundirs = sweep.rundirs
        args.out = args.out or sweep.directory / "eval"
        if args.message_bits is None and sweep.message_bits is not None:
            args.message_bits = sweep.message_bits
    if args.out is None:
        return _fail("give --out REPORTDIR (only a sweep directory has a default)", 2)
    if args.claims is not None:
        from mesheval.claims.spec import ClaimsError, load_claims

        try:  # a bad claims file stops before Spark starts
            load_claims(args.claims)
        except ClaimsError as exc:
            return _fail(str(exc), 2)
    if args.follow is not None and not args.follow.is_dir():
        return _fail(f"{args.follow}: not a directory", 2)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(f"{args.out}: {exc.strerror or exc}", 2)

    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    from mesheval.claims.spec import ClaimsError
    from mesheval.load import InputError
    from mesheval.manifest import ManifestError

    try:
        if args.follow is not None:
            return _follow(args)
        return _batch(args)
    except (InputError, ManifestError, ClaimsError) as exc:
        return _fail(str(exc), 2)
    except (PySparkException, Py4JError) as exc:
        return _fail(f"Spark failed: {_first_line(exc)}", 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


def _batch(args: argparse.Namespace) -> int:
    from mesheval.batch import run_batch
    from mesheval.report import headline, text_table, write_report
    from mesheval.session import get_session

    spark = get_session(args.master, driver_memory=_driver_memory(args))
    result = run_batch(spark, args.rundirs, args.out, warmup_s=args.warmup,
                       window_s=args.window, range_m=args.range_m,
                       message_bits=args.message_bits, deadline_s=args.deadline,
                       optimum=not args.no_optimum, cache_window_s=args.cache_window)
    if not args.no_report:
        write_report(result.document, args.out)
    if args.claims is not None:
        from mesheval.claims.page import write_page

        page = write_page(args.claims, result.document, args.out,
                          args.sweep_document)
        print(f"results page: {page}")
    header, rows = headline(result.document)
    print(text_table(header, rows))
    quality = result.document["quality"]
    if quality["invalid_total"]:
        bad = [f for f in quality["files"] if f["invalid"]]
        print(f"\n{quality['invalid_total']} invalid lines in {len(bad)} files "
              f"(per file in {args.out / 'metrics.json'})")
    print(f"\nreport: {args.out / 'report.md'}" if not args.no_report
          else f"\nmetrics: {args.out / 'metrics.json'}")
    return 0


def _driver_memory(args: argparse.Namespace) -> str | None:
    """``--driver-memory``, or for a local session one sized to the input (a whole sweep
    at the fixed 2 GB failed only after ten minutes); said on stderr when it is not 2g."""
    given: str | None = args.driver_memory
    if given is not None or (args.master and not args.master.startswith("local")):
        return given
    from mesheval.load import telemetry_files
    from mesheval.session import DRIVER_MEMORY, sized_driver_memory

    out = args.out.resolve()
    size = sum(f.stat().st_size for rundir in args.rundirs
               for f in telemetry_files(rundir.resolve(), exclude=out,
                                        suffixes=(".jsonl", ".parquet")))
    memory = sized_driver_memory(size)
    if memory != DRIVER_MEMORY:
        print(f"mesheval: driver memory {memory} for {size / 1e9:.1f} GB of telemetry "
              "(--driver-memory to choose)", file=sys.stderr)
    return memory


def _follow(args: argparse.Namespace) -> int:
    from mesheval.session import get_session
    from mesheval.stream import follow, format_summary

    spark = get_session(args.master, driver_memory=args.driver_memory)
    summary = follow(spark, args.follow, args.out, once=args.once, interval_s=args.interval,
                     ttl_s=args.ttl, window_s=args.window, warmup_s=args.warmup or 0.0)
    print(format_summary(summary))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "collect":
        from mesheval.collect import collect_main

        return collect_main(args[1:])
    if args and args[0] == "page":
        from mesheval.claims.again import page_main

        return page_main(args[1:])
    if args and args[0] == "map":
        from mesheval.livemap.server import map_main

        return map_main(args[1:])
    return eval_main(args)


if __name__ == "__main__":
    sys.exit(main())
