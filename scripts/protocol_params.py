#!/usr/bin/env python3
"""Regenerate the parameter tables of docs/protocols/NAME.md from the params classes.

    .venv/bin/python scripts/protocol_params.py           # rewrite the tables
    .venv/bin/python scripts/protocol_params.py --check   # exit 1 if a page is stale

Only the part between ``<!-- params:begin -->`` and ``<!-- params:end -->`` is
written; a missing page is created with its title and the table, for the prose
to be added around it, and a page without the markers gets a "Parameters"
section at its end, once every field of the protocol's params has its
``param_docs`` entry (until then the protocol is listed as undocumented).
tests/unit/test_protocol_docs.py runs the check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from meshsub.core.paramdocs import BEGIN, ParamDocError, render_block, replace_block
from meshsub.core.registry import available, get_protocol

DOCS = Path(__file__).resolve().parent.parent / "docs" / "protocols"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    for name in available():
        cls = get_protocol(name).Params
        page = DOCS / f"{name}.md"
        try:
            old = page.read_text() if page.exists() else f"# {name}\n\n{render_block(cls)}\n"
            if BEGIN not in old:
                old = old.rstrip("\n") + f"\n\n## Parameters\n\n{render_block(cls)}\n"
            new = replace_block(old, cls)
        except ParamDocError as exc:
            print(f"protocol_params: {name}: not documented yet: {exc}", file=sys.stderr)
            continue
        if new != (page.read_text() if page.exists() else None):
            stale.append(page)
            if not args.check:
                page.write_text(new)
    for page in stale:
        print(f"{'stale' if args.check else 'written'}: {page}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
