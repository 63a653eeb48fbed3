"""``meshsim vmesh ...``: the virtual mesh's subcommands (wired in ``meshsim.cli``).

Errors are ``VmeshError`` lines (exit 2 for usage, 1 for a failed operation);
``exec``, ``shell`` and ``logs`` hand the terminal to podman and return its status.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from meshsim.host.errors import VmeshError
from meshsim.vmesh import bake, deploy, image, inventory, lifecycle, nodes
from meshsim.vmesh.plan import DEFAULT_RUN
from meshsim.vmesh.runstate import run_dir
from meshsim.vmesh.wheelhouse import build_wheelhouse


def add_parser(sub: argparse._SubParsersAction,  # type: ignore[type-arg]
               parser_class: type[argparse.ArgumentParser]) -> None:
    vm = sub.add_parser("vmesh", help="virtual field devices: systemd containers on a bridge")
    vsub = vm.add_subparsers(dest="vmesh_command", required=True, parser_class=parser_class)

    def named(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--name", default=DEFAULT_RUN, metavar="RUN",
                       help=f"run name (default {DEFAULT_RUN!r}; others: 1-5 of [a-z0-9])")
        return p

    img = vsub.add_parser("image", help="build the device images if their inputs changed")
    img.add_argument("--rebuild", action="store_true", help="build even if it exists")
    img.add_argument("--base", action="store_true",
                     help="only the base image (the operating system), not the baked one")
    img.add_argument("--arch", choices=tuple(image.ARCHES), default=None,
                     help="the devices' architecture (default: the host's; others run "
                          "under qemu-user)")

    wh = vsub.add_parser("wheelhouse", help="build the wheels a device of ARCH installs "
                         "(the playbook's meshsub_wheelhouse_dir)")
    wh.add_argument("dest", type=Path, metavar="DIR")
    wh.add_argument("--arch", choices=tuple(image.ARCHES), default=None,
                    help="the devices' Debian architecture (default: the host's); armhf "
                         "compiles msgpack and mmh3 in an emulated container (root)")

    up = named(vsub.add_parser("up", help="start N devices and write the inventory"))
    up.add_argument("--nodes", type=int, required=True, metavar="N")
    up.add_argument("--protocol", default="flooding", help="meshsub protocol (inventory)")
    up.add_argument("--spacing", type=float, default=50.0, metavar="M",
                    help="grid spacing of the static positions, metres")
    up.add_argument("--image", choices=lifecycle.IMAGE_KINDS, default="baked",
                    help="baked: meshsub installed, deploy with --tags configure (default); "
                         "base: the bare system, deploy with the full site.yml")
    up.add_argument("--rebuild-image", action="store_true")
    up.add_argument("--arch", default=None, metavar="ARCH[,ARCH...]",
                    help="the devices' architecture (amd64, arm64, armhf; default the "
                         "host's), or one per device, comma-separated (a mixed fleet)")

    down = named(vsub.add_parser("down", help="remove everything the run created"))
    down.add_argument("--purge", action="store_true",
                      help="also delete the run directory (keys, inventory, wheelhouse)")
    st = named(vsub.add_parser("status", help="devices, systemd state, meshsubd state"))
    st.add_argument("--json", action="store_true")
    ex = named(vsub.add_parser("exec", help="run a command in a device"))
    ex.add_argument("node", help="index, hostname or container name")
    ex.add_argument("cmd", nargs=argparse.REMAINDER, help="the command")
    sh_ = named(vsub.add_parser("shell", help="interactive shell in a device"))
    sh_.add_argument("node")
    lg = named(vsub.add_parser("logs", help="journal of meshsubd in a device"))
    lg.add_argument("node")
    lg.add_argument("-f", "--follow", action="store_true")
    lg.add_argument("-n", "--lines", type=int, default=100)
    named(vsub.add_parser("deploy", help="run deploy/ansible/site.yml on the run; further "
                          "arguments go to ansible-playbook (e.g. --tags configure)"))


def _log(msg: str) -> None:
    print(f"vmesh: {msg}", file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> int:
    cmd = args.vmesh_command
    if cmd == "wheelhouse":
        names = build_wheelhouse(args.dest, arch=args.arch, log=_log)
        print("\n".join(names))
        return 0
    if os.geteuid() != 0:
        raise VmeshError("needs root (network namespaces, bridges, containers)")
    if cmd == "image":
        print(image.ensure_image(rebuild=args.rebuild, arch=args.arch, log=_log))
        if not args.base:
            with tempfile.TemporaryDirectory(prefix="msub-wheels-") as tmp:
                build_wheelhouse(Path(tmp) / "wheels", arch=args.arch, agent=True, log=_log)
                print(bake.ensure_baked(Path(tmp) / "wheels", arch=args.arch,
                                        rebuild=args.rebuild, log=_log))
        return 0
    if cmd == "up":
        res = lifecycle.up(args.nodes, args.name, protocol=args.protocol,
                           spacing_m=args.spacing, image_kind=args.image,
                           rebuild_image=args.rebuild_image, arch=args.arch, log=_log)
        verb = "already up" if res.reused else f"up in {res.seconds:.1f} s"
        print(f"run {args.name}: {len(res.plan.nodes)} devices {verb}; inventory {res.inventory}")
        return 0
    if cmd == "down":
        n = lifecycle.teardown(args.name, log=_log, purge=args.purge)
        print(f"run {args.name}: removed {n} objects")
        return 0
    if cmd == "status":
        return _status(args)
    if cmd == "deploy":
        inv = run_dir(args.name) / inventory.INVENTORY
        lifecycle.load_plan(args.name)
        return subprocess.call([deploy.ansible_playbook(), "-i", str(inv), str(deploy.PLAYBOOK),
                                "-e", "meshsub_serial=100%", *getattr(args, "ansible_args", [])],
                               env=deploy.playbook_env(), cwd=deploy.ANSIBLE_DIR)
    node = lifecycle.load_plan(args.name).node(args.node)
    tty = ["-it"] if sys.stdin.isatty() else ["-i"]
    if cmd == "exec":
        if not args.cmd:
            raise VmeshError("exec: give a command")
        return subprocess.call([*nodes.PODMAN, "exec", *tty, node.container, *args.cmd])
    if cmd == "shell":
        return subprocess.call([*nodes.PODMAN, "exec", *tty, node.container, "/bin/bash", "-l"])
    journal = ["journalctl", "--no-pager", "-u", "meshsubd", "-n", str(args.lines)]
    return subprocess.call([*nodes.PODMAN, "exec", *tty, node.container,
                            *journal, *(["-f"] if args.follow else [])])


def _status(args: argparse.Namespace) -> int:
    state, rows = lifecycle.status(args.name)
    if state is None:
        print(f"run {args.name}: not up")
        return 1
    if args.json:
        print(json.dumps({"run": state.run, "complete": state.complete, "image": state.image,
                          "nodes": [r.__dict__ for r in rows]}, indent=2))
        return 0
    print(f"run {state.run}: {state.nodes} devices, image {state.image}"
          + ("" if state.complete else " (bring-up incomplete)"))
    print(f"{'host':<16} {'container':<12} {'mgmt':<15} {'mesh':<15} {'system':<10} meshsubd")
    for r in rows:
        print(f"{r.hostname:<16} {r.container:<12} {r.mgmt_ip:<15} {r.mesh_ip:<15} "
              f"{(r.system if r.running else 'stopped'):<10} {r.meshsubd}")
    return 0


def run_cli(args: argparse.Namespace) -> int:
    """Entry from ``meshsim.cli``: one-line errors, like every other subcommand."""
    try:
        return main(args)
    except VmeshError as exc:
        print(f"meshsim vmesh: {exc}", file=sys.stderr)
        return 1


def parse_for_test(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="meshsim")
    add_parser(parser.add_subparsers(dest="command"), argparse.ArgumentParser)
    return parser.parse_args(list(argv))
