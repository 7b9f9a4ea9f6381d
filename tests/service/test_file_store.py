"""service.file_store: names, expiry and clean-up, on a clock the test moves."""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

import pytest

from service.file_store import FileStore


def test_files_are_kept_under_unguessable_names_until_they_expire() -> None:
    now = [100.0]
    store = FileStore(expiry_s=60, clock=lambda: now[0])
    name = asyncio.run(store.put(b"data", filename="../Bericht über Hunde.txt", media_type="text/plain"))
    other = asyncio.run(store.put(b"data", filename=".hidden", media_type="text/plain"))
    assert re.fullmatch(r"[A-Za-z0-9_-]{32}\._Bericht_ber_Hunde\.txt", name), name
    assert other.endswith(".hidden") and other.split(".")[0] != name.split(".")[0]
    stored = store.get(name)
    assert stored is not None and stored.path.read_bytes() == b"data"
    assert (stored.filename, stored.media_type) == ("../Bericht über Hunde.txt", "text/plain")
    assert store.get("../" + name) is None and store.get(stored.path.name + "x") is None
    now[0] += 60
    assert store.get(name) is None and not stored.path.exists()
    directory = stored.path.parent
    store.close()
    assert not directory.exists()


def test_a_store_that_stored_nothing_makes_no_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    store = FileStore(expiry_s=60)
    assert store.get("anything") is None
    store.close()
    assert list(tmp_path.iterdir()) == []
