"""The glossary store (``service.glossaries``) alone: SQLite under a data directory."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from service.glossaries import DATABASE_NAME, GlossaryStore, InvalidEntries, parse_entries, to_tsv

ENTRIES = {"dog": "Hund", "cat": "Katze"}


def test_create_get_list_entries_delete(tmp_path: Path) -> None:
    store = GlossaryStore(tmp_path / "data")
    assert not (tmp_path / "data").exists()  # nothing written until it is used
    created = store.create("me", "animals", "en", "de", ENTRIES)
    assert (created.name, created.source_lang, created.target_lang, created.entry_count) == ("animals", "en", "de", 2)
    assert created.creation_time.endswith("Z")
    assert store.get("me", created.glossary_id) == created
    assert store.list("me") == [created]
    assert store.entries("me", created.glossary_id) == ENTRIES
    assert list(store.entries("me", created.glossary_id) or {}) == ["dog", "cat"]  # in the order given
    assert store.delete("me", created.glossary_id)
    assert store.get("me", created.glossary_id) is None
    assert store.entries("me", created.glossary_id) is None
    assert not store.delete("me", created.glossary_id)
    assert store.list("me") == []


def test_owners_see_only_their_own(tmp_path: Path) -> None:
    store = GlossaryStore(tmp_path)
    mine = store.create("me", "a", "en", "de", ENTRIES)
    theirs = store.create("them", "b", "de", "en", {"Hund": "dog"})
    assert store.list("me") == [mine] and store.list("them") == [theirs]
    assert store.get("them", mine.glossary_id) is None
    assert store.entries("them", mine.glossary_id) is None
    assert not store.delete("them", mine.glossary_id)
    assert store.get("me", mine.glossary_id) == mine


def test_kept_across_restarts(tmp_path: Path) -> None:
    created = GlossaryStore(tmp_path).create("me", "a", "en", "de", ENTRIES)
    reopened = GlossaryStore(tmp_path)
    assert reopened.get("me", created.glossary_id) == created
    assert reopened.entries("me", created.glossary_id) == ENTRIES
    assert (tmp_path / DATABASE_NAME).is_file()


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    store = GlossaryStore(tmp_path)
    store.create("me", "kept", "en", "de", ENTRIES)
    with pytest.raises(sqlite3.Error):
        store.create("me", "broken", "en", "de", {"dog": "Hund", "cat": object()})  # type: ignore[dict-item]
    assert [g.name for g in store.list("me")] == ["kept"]
    with sqlite3.connect(tmp_path / DATABASE_NAME) as db:
        assert db.execute("SELECT count(*) FROM entries").fetchone() == (2,)


def test_concurrent_writers_and_readers(tmp_path: Path) -> None:
    store = GlossaryStore(tmp_path)

    def work(i: int) -> None:
        created = store.create("me", f"g{i}", "en", "de", {f"term{j}": f"Begriff{j}" for j in range(50)})
        assert store.entries("me", created.glossary_id) == {f"term{j}": f"Begriff{j}" for j in range(50)}
        if i % 2:
            assert store.delete("me", created.glossary_id)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(32)))
    assert sorted(g.name for g in store.list("me")) == sorted(f"g{i}" for i in range(0, 32, 2))
    assert all(g.entry_count == 50 for g in store.list("me"))


def test_create_refuses_an_empty_name_or_no_entries(tmp_path: Path) -> None:
    store = GlossaryStore(tmp_path)
    with pytest.raises(InvalidEntries):
        store.create("me", " ", "en", "de", ENTRIES)
    with pytest.raises(InvalidEntries):
        store.create("me", "a", "en", "de", {})


def test_parse_tsv_and_csv() -> None:
    assert parse_entries("dog\tHund\n\n cat \t Katze \r\n", "tsv") == ENTRIES
    assert parse_entries('dog,Hund\n"cat, big",Großkatze\nfox,Fuchs,en,de\n', "csv") == {
        "dog": "Hund",
        "cat, big": "Großkatze",
        "fox": "Fuchs",
    }
    assert to_tsv(ENTRIES) == "dog\tHund\ncat\tKatze\n"
    assert parse_entries(to_tsv(ENTRIES), "tsv") == ENTRIES


@pytest.mark.parametrize(
    ("text", "entries_format", "says"),
    [
        ("dog\tHund\ndog\tHündchen", "tsv", "duplicate source term"),
        ("dog\t", "tsv", "empty term"),
        ("\tHund", "tsv", "empty term"),
        ("dog Hund", "tsv", "expected source<TAB>target"),
        ("dog\tHund\tx", "tsv", "expected source<TAB>target"),
        ("", "tsv", "at least one entry"),
        ("\n\n", "csv", "at least one entry"),
        ("dog,Hund,en", "csv", "expected source,target"),
        ("dog,Hu\x07nd", "csv", "control character"),
        ('"dog,Hund', "csv", "malformed CSV"),
        ("a,b", "json", "entries_format"),
    ],
)
def test_invalid_entries(text: str, entries_format: str, says: str) -> None:
    with pytest.raises(InvalidEntries, match=says):
        parse_entries(text, entries_format)  # type: ignore[arg-type]
