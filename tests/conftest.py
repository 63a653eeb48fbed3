"""Test-wide set-up.

pytest runs with ``--import-mode=importlib`` so that test modules in different
folders may share a basename (tests/sim/test_cli.py and
tests/runtime/test_cli.py). That mode does not put test folders on
``sys.path``, so the folders holding shared test helpers (``harness``,
``simhelpers``) are added here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_TESTS = Path(__file__).parent
for helper_dir in ("protocol", "sim", "runtime", "e2e", "telemetry", "vmesh", "ansible",
                   "medium", "livemap"):
    path = str(_TESTS / helper_dir)
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``root`` skip, visibly, when not run as root.

    Under pytest-xdist (``./test.sh`` runs ``-n 4 --dist loadgroup``) the virtual-mesh
    tests run on two workers, each with a session fleet of its own (``_fleet_groups``),
    the other tests that need root on another (one medium or set of namespaces at a
    time; their names never meet the fleets'), mesheval's tests on the fourth
    (tests/telemetry: one Spark JVM), and the rest spread over the workers as they run
    out of grouped work (pytest-xdist gives a worker more only when it has two tests or
    fewer left). The virtual-mesh tests mostly wait on real time, so the rest of the
    suite runs beside them.
    """
    fleet_group = _fleet_groups(items)
    for item in items:
        if item.get_closest_marker("emulated_device") is not None:  # see below
            item.add_marker(pytest.mark.xdist_group("arm64"))
        elif "root" in item.keywords:  # the fleets' tests apart from the namespaces' ones
            vmesh = _TESTS / "vmesh" in Path(item.path).parents
            item.add_marker(pytest.mark.xdist_group(fleet_group[item.path.name] if vmesh
                                                    else "root"))
        elif _TESTS / "telemetry" in Path(item.path).parents:  # mesheval: Spark in-process
            item.add_marker(pytest.mark.xdist_group("spark"))
    # The emulated arm64 device's test (tests/vmesh/test_arch_root.py) waits for an
    # image built under qemu: last in the queue, so the first worker out of other work
    # takes it while the fleet's worker still runs (the image is built meanwhile by
    # ``pytest_collection_finish``), and a run of its own (names and subnets of its own).
    items.sort(key=lambda item: item.get_closest_marker("emulated_device") is not None)
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, nftables, containers)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


FLEET_GROUPS = ("vmesh",) if os.environ.get("MSUB_TEST_FLEETS") == "1" else ("vmesh", "vmesh2")
"""The virtual-mesh tests' xdist groups: one worker and one session fleet each.
``MSUB_TEST_FLEETS=1`` runs them all on one worker and one fleet, as before 2026-11-27."""
FLEET_FILE_S = {
    "test_run_root.py": 255, "test_vmesh_root.py": 180, "test_bake_root.py": 150,
    "test_hesper_lake_root.py": 130, "test_structure_root.py": 130, "test_tg_meet_root.py": 115,
    "test_bsub_meet_root.py": 80, "test_pull_meet_root.py": 60, "test_df_line_root.py": 60,
    "test_puma_walk_root.py": 140, "test_brvst_walk_root.py": 70, "test_giant_ferry_root.py": 80,
    "test_dibs_repair_root.py": 60, "test_dr_grid_root.py": 45, "test_st_line_root.py": 45,
    "test_upgrade_small_root.py": 150,
}
"""Seconds each virtual-mesh test file's default-run tests took in the final suites of
2026-11-26/27 (``--durations``, the fleet's bring-up left out) and in the engineers'
root runs of 2026-11-27 (test_vmesh_root's playbook tests and every protocol's
scenario added that day, at loads of 2-17); a file not named here
counts ``FLEET_FILE_DEFAULT_S``, the budget of one protocol's scenario."""
FLEET_FILE_DEFAULT_S = 45


def _fleet_groups(items: list[pytest.Item]) -> dict[str, str]:
    """Each virtual-mesh test file's group, the files split between ``FLEET_GROUPS`` so
    that their expected times are about equal (longest first, each to the lighter group).

    A file stays in one group: its tests share module fixtures and run in file order.
    The virtual-mesh tests were the suite's critical path on one worker (about 900 of the
    1156-1203 s of the final suites before the split), and each protocol adds a scenario.
    """
    fleet_items = [item for item in items if "root" in item.keywords
                   and _TESTS / "vmesh" in Path(item.path).parents]
    default_run = [i for i in fleet_items if i.get_closest_marker("long") is None]
    # Balanced on the default run's tests (a long-tier file has its own, unweighed time;
    # ``-m long`` selects before this hook does not, so leave those out unless all are).
    files = sorted({item.path.name for item in default_run or fleet_items})
    load = dict.fromkeys(FLEET_GROUPS, 0)
    groups: dict[str, str] = {}
    for name in sorted(files, key=lambda n: -FLEET_FILE_S.get(n, FLEET_FILE_DEFAULT_S)):
        lighter = min(FLEET_GROUPS, key=lambda g: (load[g], FLEET_GROUPS.index(g)))
        groups[name] = lighter
        load[lighter] += FLEET_FILE_S.get(name, FLEET_FILE_DEFAULT_S)
    for item in fleet_items:  # the long tier's files beyond: the lighter group in turn
        if item.path.name not in groups:
            lighter = min(FLEET_GROUPS, key=lambda g: (load[g], FLEET_GROUPS.index(g)))
            groups[item.path.name] = lighter
            load[lighter] += FLEET_FILE_DEFAULT_S
    return groups


@pytest.hookimpl(trylast=True)  # after pytest-xdist named the groups in the node ids
def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse to run grouped tests apart: two fleets or media of the same names would
    tear each other down. pytest 9.2 silently stopped pytest-xdist's grouping
    (pytest-xdist issue #1386; pyproject.toml pins pytest below it)."""
    if not session.config.option.collectonly:
        _prebuild_emulated_images(session.items)
    if not session.config.getoption("loadgroup", default=False):
        return
    apart = [i.nodeid for i in session.items
             if i.get_closest_marker("xdist_group") is not None and "@" not in i.nodeid]
    if apart:
        message = (f"pytest-xdist did not group {len(apart)} tests (first: {apart[0]}); "
                   "install pytest<9.2 or run with -n 0")
        print(message, file=sys.stderr)  # a worker's UsageError reaches the log as a crash
        raise pytest.UsageError(message)


PREBUILD_LOG = Path("/var/tmp/msub-prebuild-{arch}.log")


def _prebuild_emulated_images(items: list[pytest.Item]) -> None:
    """Start building the base image of each emulated architecture a selected test needs.

    An arm64 image is debootstrapped under qemu-user: many minutes on a clean machine
    (docs/vmesh.md, "Tests and figures"). Started at collection, niced, it uses the
    CPU the rest of the suite leaves idle (the fleet's tests mostly wait on real time)
    instead of the test's own time. Detached: ``meshsim vmesh image --base`` takes the
    image's build lock, so the test (``ensure_image``) waits for it or finds the image
    made; ``flock -n`` keeps a second worker from starting a second one.
    """
    arches = sorted({str(m.args[0]) for item in items
                     for m in item.iter_markers("emulated_device") if m.args})
    if os.geteuid() != 0 or not arches:
        return
    import shutil
    import subprocess

    from meshsim.host.errors import VmeshError
    from meshsim.vmesh import image

    for arch in arches:
        try:
            image.check_emulation(arch)
            ref = image.load_recipe(arch=arch).ref
        except VmeshError:  # the test itself reports it, in one line
            continue
        if shutil.which("podman") is None or image.image_exists(ref):
            continue
        log = Path(str(PREBUILD_LOG).format(arch=arch))
        with log.open("ab") as out:
            subprocess.Popen(
                ["flock", "-n", f"/run/lock/msub-prebuild-{arch}.lock", "nice", "-n", "19",
                 sys.executable, "-m", "meshsim.cli", "vmesh", "image", "--base",
                 "--arch", arch], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True)


@pytest.fixture(scope="session")
def vmesh_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The test session's virtual fleet (``tests/vmesh/fleet.py``): root tests only.

    Brought up by the first test that uses it and shared by every virtual-mesh test
    after it (of this xdist worker: each has its own fleet, ``fleet.run_name``); removed
    at the end of the session, also when tests failed. The fleet's name is locked for
    the session (``fleet.fleet_lock``): a second test session on this host asking for
    the same fleet fails at once in one line instead of tearing down the first one's.
    """
    from fleet import FleetInUse, fleet_lock, run_name, session_fleet

    run = run_name()
    try:
        lock = fleet_lock(run)
    except FleetInUse as exc:
        pytest.fail(str(exc), pytrace=False)
    with lock, session_fleet(tmp_path_factory, run) as fleet:
        yield fleet
