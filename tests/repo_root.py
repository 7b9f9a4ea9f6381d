"""The repository's root, for tests that read its files or run commands in it.

Test modules import it by name (``from repo_root import REPO``): pytest puts ``tests/`` on
``sys.path`` for ``tests/conftest.py``, as it does each test directory for its helper modules.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
