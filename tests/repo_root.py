"""The repository's root, for tests that read its files or run commands in it.

Test modules import it by name (``from repo_root import REPO``): pytest puts ``tests/`` on
``sys.path`` for ``tests/conftest.py``, as it does each test directory for its helper modules.
"""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def python_path() -> str:
    """``PYTHONPATH`` for a subprocess that imports this checkout: the repository first, then the
    path this process was given, where packages installed beside the interpreter's may live."""
    return os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


def python_env() -> dict[str, str]:
    """This process's environment with ``python_path()``, for a subprocess that imports this checkout."""
    return os.environ | {"PYTHONPATH": python_path()}
