"""Lets the end-to-end tests import their helpers (mesh.py) as plain modules."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
