"""``mesheval.session.package_zip``: the code a cluster's workers import.

A worker imports the shipped archive with ``zipimport``, which cannot import a folder
without ``__init__.py`` (a namespace package such as ``meshsub/core/cluster``): an
evaluation that reaches such a module on a worker would fail there, not on the driver.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")


def test_a_worker_imports_namespace_packages_from_the_archive(tmp_path: Path) -> None:
    import mesheval
    import meshsub
    from mesheval.session import package_zip

    archive = tmp_path / "packages.zip"
    package_zip(archive, [meshsub, mesheval])
    # the archive first on the path: it wins over the installed (editable) copy
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "import meshsub.core.cluster.ids as m; print(m.__file__)")
    done = subprocess.run([sys.executable, "-I", "-c", code, str(archive)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-400:]
    assert done.stdout.splitlines()[0].startswith(str(archive))
