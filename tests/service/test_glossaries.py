"""The glossary store (``service.glossaries``) alone: SQLite under a data directory, and (every test
not about SQLite's file) a real PostgreSQL server's database, as MT_DATABASE_URL puts it there."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from postgres_server import fresh_database, postgres  # noqa: F401 (the fixture)

from engine.bundle import Language, Languages, Manifest
from engine.glossary import Term
from engine.repository import ModelEntry, Router
from service import glossaries
from service.database import PostgresDatabase
from service.errors import InsufficientStorage, InternalError, Unavailable
from service.glossaries import (
    DATABASE_NAME,
    MAX_ENTRIES,
    GlossaryStore,
    InvalidEntries,
    TooManyGlossaries,
    checked,
    merged,
    parse_entries,
    quoted_id,
    to_tsv,
)
from service.routes.glossaries import stored

ENTRIES = [Term("dog", "Hund"), Term("cat", "Katze")]
PAIR = ("en", "de")
OpenStore = Callable[[], GlossaryStore]  # another store on the test's database: another replica


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Stores on one empty database of each backend."""
    url = fresh_database(request.getfixturevalue("postgres")) if request.param == "postgresql" else ""
    pools: list[PostgresDatabase] = []

    def open_one() -> GlossaryStore:
        if not url:
            return GlossaryStore(tmp_path / "data")
        pools.append(PostgresDatabase(url))
        return GlossaryStore(tmp_path, postgres=pools[-1])

    yield open_one
    for pool in pools:
        pool.close()


def _model(name: str, source: Language, target: Language) -> ModelEntry:
    # Only the languages of a manifest route: the rest of a bundle's is not needed to resolve codes.
    languages = Languages(source=[source], target=[target])
    return ModelEntry(name, Path(name), Manifest.model_construct(name=name, languages=languages))


# en->de and de->en, named as NLLB names them too: "de" is served, but not as a target of English.
SERVED = Router(
    [
        _model("en-de", Language(code="en", model_code="eng_Latn"), Language(code="de", model_code="deu_Latn")),
        _model("de-en", Language(code="de", model_code="deu_Latn"), Language(code="en", model_code="eng_Latn")),
    ],
    pivot=False,
)


def parse(text: str, entries_format: str = "csv") -> list[Term]:
    return parse_entries(text, entries_format, PAIR, SERVED)  # type: ignore[arg-type]


def test_create_get_list_entries_delete(open_store: OpenStore) -> None:
    store = open_store()
    created = store.create("me", "animals", "en", "de", ENTRIES)
    assert (created.name, created.source_lang, created.target_lang, created.entry_count) == ("animals", "en", "de", 2)
    assert created.creation_time.endswith("Z")
    assert store.get("me", created.glossary_id) == created
    assert store.list("me") == [created]
    assert store.entries("me", created.glossary_id) == ENTRIES  # in the order given
    assert store.delete("me", created.glossary_id)
    assert store.get("me", created.glossary_id) is None
    assert store.entries("me", created.glossary_id) is None
    assert not store.delete("me", created.glossary_id)
    assert store.list("me") == []


def test_owners_see_only_their_own(open_store: OpenStore) -> None:
    store = open_store()
    mine = store.create("me", "a", "en", "de", ENTRIES)
    theirs = store.create("them", "b", "de", "en", [Term("Hund", "dog")])
    assert store.list("me") == [mine] and store.list("them") == [theirs]
    assert store.get("them", mine.glossary_id) is None
    assert store.entries("them", mine.glossary_id) is None
    assert not store.delete("them", mine.glossary_id)
    assert store.get("me", mine.glossary_id) == mine


def test_kept_across_restarts(tmp_path: Path) -> None:
    store = GlossaryStore(tmp_path / "data")
    assert not (tmp_path / "data").exists()  # nothing written until it is used
    created = store.create("me", "a", "en", "de", ENTRIES)
    reopened = GlossaryStore(tmp_path / "data")
    assert reopened.get("me", created.glossary_id) == created
    assert reopened.entries("me", created.glossary_id) == ENTRIES
    assert (tmp_path / "data" / DATABASE_NAME).is_file()


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    store = GlossaryStore(tmp_path)
    store.create("me", "kept", "en", "de", ENTRIES)
    with pytest.raises(sqlite3.Error):
        store.create("me", "broken", "en", "de", [Term("dog", "Hund"), Term("cat", "Katze", object())])  # type: ignore[arg-type]
    assert [g.name for g in store.list("me")] == ["kept"]
    with sqlite3.connect(tmp_path / DATABASE_NAME) as db:
        assert db.execute("SELECT count(*) FROM entries").fetchone() == (2,)


def test_concurrent_writers_and_readers(open_store: OpenStore) -> None:
    store = open_store()

    def work(i: int) -> None:
        terms = [Term(f"term{j}", f"Begriff{j}") for j in range(50)]
        created = store.create("me", f"g{i}", "en", "de", terms)
        assert store.entries("me", created.glossary_id) == terms
        if i % 2:
            assert store.delete("me", created.glossary_id)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(32)))
    assert sorted(g.name for g in store.list("me")) == sorted(f"g{i}" for i in range(0, 32, 2))
    assert all(g.entry_count == 50 for g in store.list("me"))


def test_create_refuses_an_empty_name_or_no_entries(open_store: OpenStore) -> None:
    store = open_store()
    with pytest.raises(InvalidEntries):
        store.create("me", " ", "en", "de", ENTRIES)
    with pytest.raises(InvalidEntries):
        store.create("me", "a", "en", "de", [])


def test_parse_tsv_and_csv() -> None:
    assert parse("dog\tHund\n\n cat \t Katze \r\n", "tsv") == ENTRIES
    assert parse('dog,Hund\n"cat, big",Großkatze\nfox,Fuchs,en,de\n') == [
        Term("dog", "Hund"),
        Term("cat, big", "Großkatze"),
        Term("fox", "Fuchs"),
    ]
    assert to_tsv(ENTRIES) == "dog\tHund\ncat\tKatze\n"
    assert parse(to_tsv(ENTRIES), "tsv") == ENTRIES


@pytest.mark.parametrize(
    ("text", "entries_format", "says"),
    [
        ("dog\tHund\ndog\tHündchen", "tsv", "duplicate source term"),
        ("dog\tHund\nDOG\tHündchen", "tsv", "duplicate source term"),  # as it matches: case-folded
        ("dog\t", "tsv", "empty term"),
        ("\tHund", "tsv", "empty term"),
        ("dog Hund", "tsv", "expected source<TAB>target"),
        ("dog\tHund\tx", "tsv", "expected source<TAB>target"),
        ("", "tsv", "at least one entry"),
        ("\n\n", "csv", "at least one entry"),
        ("dog,Hund,en", "csv", "expected source,target"),
        ("dog", "csv", "expected source,target"),
        ("dog,Hund,fr,es", "csv", "not the glossary's, en to de"),
        ("dog,Hu\x07nd", "csv", "control character"),
        ("dog,Hund\u202e", "csv", "bidirectional"),
        ("\u2066dog,Hund", "csv", "bidirectional"),
        ('"dog,Hund', "csv", "malformed CSV"),
        ("a,b", "json", "entries_format"),
        # found between any two words, its target put there: "Ein Hund - Katze rennt."
        ("-\tKatze", "tsv", "a source term needs a letter or a digit, not only '-'"),
        ("...,Punkte", "csv", "needs a letter or a digit"),
        ("\u200b\tHund", "tsv", "empty term"),
    ],
)
def test_invalid_entries(text: str, entries_format: str, says: str) -> None:
    with pytest.raises(InvalidEntries, match=says):
        checked(parse(text, entries_format))


def test_right_to_left_terms_keep_their_marks() -> None:
    glossary = checked(parse("dog\tכלב\u200f", "tsv"))
    assert glossary.terms[0].target == "כלב\u200f"


@pytest.mark.parametrize(
    "languages",
    [
        "en,de",
        "EN,DE",
        "En,dE",
        " en , de ",
        "en-US,de",
        "EN-GB,DE",
        "eng_Latn,deu_Latn",
        "ENG_LATN,de",
        ",",
        "en,",
    ],
)
def test_csv_rows_naming_the_glossarys_languages_are_kept(languages: str) -> None:
    # As the router resolves a request's codes: any case, a variant DeepL names, the model's own
    # code; an empty column names no language.
    assert parse(f"dog,Hund,{languages}\ncat,Katze\n") == ENTRIES


@pytest.mark.parametrize(
    "languages",
    ["fr,de", "de,de", "de,en", "en,fr", "en,en", "en,es", "xx,de", "en,deu", "fr,es", "EN-XX,de", "en,de-DE"],
)
def test_csv_rows_for_other_languages_are_left_out(languages: str) -> None:
    # As DeepL does: such a row is ignored, the glossary made of the others. A variant DeepL does
    # not name (EN-XX, DE-DE) is no language, as in a translation's languages.
    assert parse(f"dog,Hund\nfox,Fuchs,{languages}\ncat,Katze,en,de\n") == ENTRIES


def test_a_csv_text_with_no_row_for_the_glossarys_languages_names_the_first() -> None:
    with pytest.raises(InvalidEntries, match=r"entry 2: its languages \('fr' to 'es'\)") as refused:
        parse("\ncat,Katze,fr,es\ndog,Hund,de,en\n")
    assert refused.value.entry == 2


def test_csv_columns_after_the_languages_are_ignored() -> None:
    # DeepL's glossary exports may add a relevance column.
    assert parse("dog,Hund,en,de,0.9\ncat,Katze,EN,DE,,x\n") == ENTRIES
    assert parse("dog,Hund,en,de,0.9\nfox,Fuchs,fr,de,0.9\ncat,Katze,en,de\n") == ENTRIES


@pytest.mark.parametrize(("text", "entry"), [("dog,Hund\ncat,Katze,en\n", 2), ("dog\tHund\tx", 1)])
def test_a_row_of_three_fields_is_refused_naming_it(text: str, entry: int) -> None:
    entries_format = "tsv" if "\t" in text else "csv"
    with pytest.raises(InvalidEntries, match=f"entry {entry}: expected source") as refused:
        parse(text, entries_format)
    assert refused.value.entry == entry


def test_tsv_lines_are_not_read_for_languages() -> None:
    # A TSV line has two fields and no languages: commas in it are its terms'.
    assert parse("dog,fr\tHund,es\n", "tsv") == [Term("dog,fr", "Hund,es")]
    with pytest.raises(InvalidEntries, match="entry 1: expected source<TAB>target"):
        parse("dog\tHund\ten\tde\n", "tsv")


def test_duplicates_are_judged_as_the_engine_matches_terms(open_store: OpenStore) -> None:
    store = open_store()
    with pytest.raises(InvalidEntries, match="term 1: duplicate source term 'Dog'"):
        store.create("me", "a", "en", "de", [Term("dog", "Hund"), Term("Dog", "Rüde")])
    # Case-sensitive terms differ by case, and from a case-insensitive one.
    terms = [Term("Apple", "Apple", True), Term("apple", "Apfel", True), Term("APPLE", "Apfel")]
    created = store.create("me", "b", "en", "de", terms)
    assert store.entries("me", created.glossary_id) == terms
    for bad, says in [
        (Term(" ", "x"), "term 0: empty term"),
        (Term("x" * 1025, "y"), "more than 1024 characters"),
        (Term(" ".join(["w"] * 17), "y"), "more than 16 words"),
        (Term("a\nb", "y"), "line break"),
    ]:
        with pytest.raises(InvalidEntries, match=says):
            store.create("me", "c", "en", "de", [bad])
    with pytest.raises(InvalidEntries, match=f"at most {MAX_ENTRIES}"):
        store.create("me", "d", "en", "de", [Term(f"t{i}", "x") for i in range(MAX_ENTRIES + 1)])
    assert [g.name for g in store.list("me")] == ["b"]


def test_terms_are_stored_stripped(open_store: OpenStore) -> None:
    """Spaces around a term, and characters of no width inside it, which the text a term is found in
    never has (a term with one never matched); a target term may be punctuation."""
    store = open_store()
    created = store.create(
        "me", "a", "en", "de", [Term(" dog ", " Hund\t"), Term("ca\u200bt", "–"), Term("i\u00adce", "Eis")]
    )
    assert store.entries("me", created.glossary_id) == [Term("dog", "Hund"), Term("cat", "–"), Term("ice", "Eis")]
    assert [m.term for m in checked(created_terms(store, created.glossary_id)).find("The cat eats ice.")] == [1, 2]


def created_terms(store: GlossaryStore, glossary_id: str) -> list[Term]:
    return store.entries("me", glossary_id)


@pytest.mark.parametrize("name", ["a\x00b", "line\nbreak", "\x1b[31mred", "evil\u202eexe.txt", "a\u2028b"])
def test_a_name_that_would_garble_a_listing_is_refused(open_store: OpenStore, name: str) -> None:
    store = open_store()
    with pytest.raises(InvalidEntries, match=r"^name: contains"):
        store.create("me", name, "en", "de", [Term("dog", "Hund")])
    created = store.create("me", "fine", "en", "de", [Term("dog", "Hund")])
    with pytest.raises(InvalidEntries, match=r"^name: contains"):
        store.update("me", created.glossary_id, name=name)


def test_an_id_too_long_for_any_glossary_is_not_echoed() -> None:
    assert quoted_id("0" * 36) == repr("0" * 36)
    assert quoted_id("x" * 500_000) == "of 500000 characters"


def test_merged() -> None:
    current = [Term("dog", "Hund"), Term("Cat", "Katze", True), Term("hot dog", "Hotdog")]
    changes = [Term("DOG", "Rüde"), Term("cat", "Kätzchen", True), Term("bird", "Vogel")]
    assert merged(current, changes) == [
        Term("Cat", "Katze", True),  # case-sensitive "cat" is another term
        Term("hot dog", "Hotdog"),
        *changes,
    ]
    assert merged(current, [], ["hot dog", "nothing"]) == current[:2]


def test_update_renames_replaces_and_merges_atomically(open_store: OpenStore) -> None:
    store = open_store()
    created = store.create("me", "a", "en", "de", ENTRIES)
    renamed = store.update("me", created.glossary_id, name="animals")
    assert renamed is not None and (renamed.name, renamed.entry_count) == ("animals", 2)
    assert store.get("me", created.glossary_id) == renamed
    patched = store.update(
        "me", created.glossary_id, changes=[Term("Dog", "Rüde"), Term("bird", "Vogel")], remove=["cat"]
    )
    assert patched is not None and patched.entry_count == 2
    assert store.entries("me", created.glossary_id) == [Term("Dog", "Rüde"), Term("bird", "Vogel")]
    replaced = store.update("me", created.glossary_id, entries=[Term("tree", "Baum")])
    assert replaced is not None and replaced.entry_count == 1 and replaced.creation_time == created.creation_time
    assert store.entries("me", created.glossary_id) == [Term("tree", "Baum")]
    # A change that would leave an invalid glossary changes nothing, the name included.
    for change in [
        {"name": "new", "changes": [Term("a", "b"), Term("A", "c")]},
        {"name": "new", "remove": ["tree"]},
        {"name": "new", "entries": []},
        {"name": " "},
    ]:
        with pytest.raises(InvalidEntries):
            store.update("me", created.glossary_id, **change)  # type: ignore[arg-type]
    assert store.get("me", created.glossary_id) == replaced
    assert store.entries("me", created.glossary_id) == [Term("tree", "Baum")]
    assert store.update("them", created.glossary_id, name="x") is None
    assert store.update("me", "nope", entries=ENTRIES) is None


def test_concurrent_merges_lose_no_change(open_store: OpenStore) -> None:
    store = open_store()
    created = store.create("me", "a", "en", "de", ENTRIES)

    def add(i: int) -> None:
        assert store.update("me", created.glossary_id, changes=[Term(f"term{i}", f"Begriff{i}")]) is not None

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(add, range(32)))
    entries = store.entries("me", created.glossary_id) or []
    assert len(entries) == 34 and {t.source for t in entries} >= {f"term{i}" for i in range(32)}
    assert store.get("me", created.glossary_id).entry_count == 34  # type: ignore[union-attr]


def test_a_database_without_case_sensitive_entries_is_migrated(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / DATABASE_NAME) as db:  # as the first version made it
        db.executescript(
            """
            CREATE TABLE glossaries (id TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL,
                source_lang TEXT NOT NULL, target_lang TEXT NOT NULL, creation_time TEXT NOT NULL,
                entry_count INTEGER NOT NULL);
            CREATE TABLE entries (glossary_id TEXT NOT NULL REFERENCES glossaries (id) ON DELETE CASCADE,
                position INTEGER NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL,
                PRIMARY KEY (glossary_id, position));
            INSERT INTO glossaries VALUES ('old', 'me', 'old', 'en', 'de', '2026-01-01T00:00:00.000Z', 1);
            INSERT INTO entries VALUES ('old', 0, 'dog', 'Hund');
            """
        )
    db.close()
    stores = [GlossaryStore(tmp_path) for _ in range(4)]
    with ThreadPoolExecutor(4) as pool:  # opened at once: one of them alters the table
        assert list(pool.map(lambda s: s.entries("me", "old"), stores)) == [[Term("dog", "Hund")]] * 4
    assert stores[0].glossary("me", "old")[1].terms == (Term("dog", "Hund"),)  # type: ignore[index]  # revisions too
    created = stores[0].create("me", "new", "en", "de", [Term("Cat", "Katze", True)])
    assert GlossaryStore(tmp_path).entries("me", created.glossary_id) == [Term("Cat", "Katze", True)]
    with sqlite3.connect(tmp_path / DATABASE_NAME) as db:  # the old glossary's text counted, as the new one's
        assert dict(db.execute("SELECT id, text_bytes FROM glossaries")) == {"old": 7, created.glossary_id: 8}
    db.close()


@pytest.mark.parametrize("existing", [False, True])
def test_stores_opening_one_database_at_once_all_get_it(tmp_path: Path, existing: bool) -> None:
    """The first connection switches the database to WAL, which needs it to itself; SQLite answers
    "locked" to the others at once, so the store must wait rather than fail (rare per round)."""
    for round_ in range(40):
        directory = tmp_path / str(round_)
        if existing:  # made by another process, not yet in WAL
            directory.mkdir()
            sqlite3.connect(directory / DATABASE_NAME).close()
        stores = [GlossaryStore(directory) for _ in range(8)]
        with ThreadPoolExecutor(8) as pool:
            made = list(pool.map(lambda s: s.create("me", "g", "en", "de", [Term("dog", "Hund")]), stores))
        assert len(GlossaryStore(directory).list("me")) == len({m.glossary_id for m in made}) == 8


def test_a_glossary_is_built_once_per_revision(open_store: OpenStore) -> None:
    """Requests naming an unchanged glossary share one built copy; any change, made by this store
    or by another one on the same database (another replica), is seen at the next request."""
    store, replica = open_store(), open_store()
    created = store.create("me", "pets", "en", "de", [Term("dog", "Hund"), Term("cat", "Katze")])
    info, glossary = store.glossary("me", created.glossary_id)  # type: ignore[misc]
    assert (info, glossary.terms) == (created, (Term("dog", "Hund"), Term("cat", "Katze")))
    assert store.glossary("me", created.glossary_id)[1] is glossary  # type: ignore[index]
    assert store.glossary("them", created.glossary_id) is None

    replica.update("me", created.glossary_id, changes=[Term("dog", "Köter")])
    _, changed = store.glossary("me", created.glossary_id)  # type: ignore[misc]
    assert changed.terms == (Term("cat", "Katze"), Term("dog", "Köter"))
    renamed = replica.update("me", created.glossary_id, name="animals")
    assert store.glossary("me", created.glossary_id)[0] == renamed  # type: ignore[index]
    replica.delete("me", created.glossary_id)
    assert store.glossary("me", created.glossary_id) is None


def test_built_glossaries_are_bounded_in_bytes(open_store: OpenStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The least recently used go first; a 10,000-entry glossary counts about 5.6 MB."""
    monkeypatch.setattr(glossaries, "MAX_BUILT_MB", 12)
    store = open_store()
    made = [
        store.create("me", f"g{g}", "en", "de", [Term(f"term {g} {i}", f"Begriff {i}") for i in range(MAX_ENTRIES)])
        for g in range(3)
    ]
    first = [store.glossary("me", m.glossary_id)[1] for m in made[:2]]  # type: ignore[index]
    assert store.glossary("me", made[0].glossary_id)[1] is first[0]  # type: ignore[index]  # now the most recent
    store.glossary("me", made[2].glossary_id)  # over 12 MB with three: the least recent (the second) goes
    assert store.glossary("me", made[0].glossary_id)[1] is first[0]  # type: ignore[index]
    assert store.glossary("me", made[1].glossary_id)[1] is not first[1]  # type: ignore[index]


class SmallDisk(GlossaryStore):
    """A store whose database cannot grow past 40 pages (160 KB), as on a full disk."""

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with super()._connection() as db:
            db.execute("PRAGMA max_page_count = 40")
            yield db


def test_a_full_disk_is_a_507_and_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    store = SmallDisk(tmp_path)
    kept = store.create("me", "small", "en", "de", ENTRIES)
    large = [Term(f"term {i}", "Begriff " * 50) for i in range(1000)]
    with pytest.raises(InsufficientStorage) as refused:
        asyncio.run(stored(lambda: store.create("me", "large", "en", "de", large)))
    assert refused.value.status == 507
    with pytest.raises(InsufficientStorage):
        asyncio.run(stored(lambda: store.update("me", kept.glossary_id, entries=large)))
    assert [g.name for g in store.list("me")] == ["small"] and store.entries("me", kept.glossary_id) == ENTRIES
    with pytest.raises(InternalError):  # any other failure of the store is the server's
        asyncio.run(stored(lambda: sqlite3.connect(tmp_path / "missing" / "x.sqlite3")))


def test_an_owner_keeps_at_most_max_glossaries(open_store: OpenStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(glossaries, "MAX_GLOSSARIES", 2)
    store = open_store()
    made = [store.create("me", f"g{i}", "en", "de", ENTRIES) for i in range(2)]
    with pytest.raises(glossaries.TooManyGlossaries, match="at most 2"):
        store.create("me", "g2", "en", "de", ENTRIES)
    assert len(store.list("me")) == 2
    store.create("them", "theirs", "en", "de", ENTRIES)  # another key's count is its own
    store.delete("me", made[0].glossary_id)
    store.create("me", "g2", "en", "de", ENTRIES)


def test_a_deleted_store_is_made_again_and_used(tmp_path: Path) -> None:
    """Deleted (or emptied) under the service, the store answered "no such table" until a restart."""
    store = GlossaryStore(tmp_path)
    store.create("me", "a", "en", "de", [Term("dog", "Hund")])
    for path in tmp_path.glob(f"{DATABASE_NAME}*"):
        path.unlink()
    assert store.problem() is None
    assert store.list("me") == []
    store.create("me", "b", "en", "de", [Term("cat", "Katze")])
    (tmp_path / DATABASE_NAME).write_bytes(b"")
    assert store.list("me") == []


def test_a_store_replaced_during_use_fails_that_call_and_is_made_again_at_the_next(tmp_path: Path) -> None:
    """Deleted between a call's check and its statement, or replaced by another database, the store
    answered "no such table" (a 500) to every call until a restart."""
    store = GlossaryStore(tmp_path)
    store.create("me", "a", "en", "de", [Term("dog", "Hund")])
    for path in tmp_path.glob(f"{DATABASE_NAME}*"):
        path.unlink()
    with closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as other, other:
        other.execute("CREATE TABLE other (x)")
    with pytest.raises(Unavailable, match="replaced while in use"):  # a 503, not a 500
        asyncio.run(stored(lambda: store.list("me")))
    assert store.list("me") == []
    store.create("me", "b", "en", "de", [Term("cat", "Katze")])
    assert [g.name for g in store.list("me")] == ["b"]


def test_a_damaged_store_says_so_and_is_used_again_once_replaced(tmp_path: Path) -> None:
    store = GlossaryStore(tmp_path)
    store.create("me", "a", "en", "de", [Term("dog", "Hund")])
    for path in tmp_path.glob(f"{DATABASE_NAME}*"):
        path.unlink()
    (tmp_path / DATABASE_NAME).write_bytes(b"not a database " * 1000)
    assert "not a database" in (store.problem() or "")
    (tmp_path / DATABASE_NAME).unlink()
    assert store.problem() is None
    assert store.list("me") == []


def test_glossary_writes_wait_on_their_own_thread_and_past_the_bound_are_refused() -> None:
    """Eight changes wait at most; the ninth is a 429 at once. Reads (a translation's glossary)
    are answered meanwhile, on threads no write holds."""
    from service.errors import Overloaded
    from service.routes.glossaries import MAX_PENDING_WRITES, _StoreThreads

    threads = _StoreThreads()
    release = threading.Event()

    async def scenario() -> None:
        writes = [asyncio.create_task(threads.run(release.wait, write=True)) for _ in range(MAX_PENDING_WRITES)]
        await asyncio.sleep(0)  # each has taken its place
        assert threads.pending_writes == MAX_PENDING_WRITES
        with pytest.raises(Overloaded) as refused:
            await threads.run(lambda: None, write=True)
        assert refused.value.headers["Retry-After"] == "1"
        assert await threads.run(lambda: "read", write=False) == "read"
        release.set()
        assert await asyncio.gather(*writes) == [True] * MAX_PENDING_WRITES
        assert threads.pending_writes == 0
        assert await threads.run(lambda: "written", write=True) == "written"

    asyncio.run(scenario())


def test_a_key_keeps_at_most_its_glossaries_text_and_other_keys_theirs(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 glossaries of 10,000 long terms let one key store tens of GB."""
    monkeypatch.setattr("service.glossaries.MAX_KEY_TEXT_BYTES", 40)
    store = open_store()
    first = store.create("me", "a", "en", "de", [Term("dog", "Hund"), Term("cat", "Katze")])  # 15 bytes
    store.create("me", "b", "en", "de", [Term("horse", "Pferd"), Term("bird", "Vogel")])  # 19 bytes: 34
    with pytest.raises(TooManyGlossaries, match="at most 0 MiB of terms"):
        store.create("me", "c", "en", "de", [Term("fish", "Fisch")])  # 9 more: 43
    with pytest.raises(TooManyGlossaries):
        store.update("me", first.glossary_id, changes=[Term("elephant", "Elefant")])
    assert store.entries("me", first.glossary_id) == [Term("dog", "Hund"), Term("cat", "Katze")]  # unchanged
    store.create("you", "c", "en", "de", [Term("fish", "Fisch")])
    store.delete("me", first.glossary_id)
    store.create("me", "c", "en", "de", [Term("fish", "Fisch")])


@contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A filesystem of ``size`` mounted at ``path`` (a tmpfs: root only, where mounts are allowed)."""
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def test_a_glossary_is_deleted_on_a_full_disk(tmp_path: Path) -> None:
    """Glossaries filled the disk, then another file the rest of it: DELETE answered 507 too."""
    with small_disk(tmp_path / "disk", "8m") as disk:
        store = GlossaryStore(disk / "data")
        made = []
        with pytest.raises(InsufficientStorage):
            for i in range(100):
                terms = [Term(f"term {i} {j}", "Begriff " * 30) for j in range(200)]
                made.append(asyncio.run(stored(lambda t=terms, i=i: store.create("me", f"g{i}", "en", "de", t))))
        with pytest.raises(OSError), (disk / "filler").open("wb") as filler:
            while True:
                filler.write(bytes(1 << 16))
                filler.flush()
        assert asyncio.run(stored(lambda: store.delete("me", made[0].glossary_id), write=True))
        assert asyncio.run(stored(lambda: store.delete("me", made[1].glossary_id), write=True))
        assert [g.glossary_id for g in store.list("me")] == [g.glossary_id for g in made[2:]]
        (disk / "filler").unlink()  # room again: what is stored is intact, the freed pages reused
        reopened = GlossaryStore(disk / "data")
        assert reopened.entries("me", made[2].glossary_id) == store.entries("me", made[2].glossary_id)
        with sqlite3.connect(disk / "data" / DATABASE_NAME) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            orphans = "SELECT count(*) FROM entries WHERE glossary_id NOT IN (SELECT id FROM glossaries)"
            assert db.execute(orphans).fetchone() == (0,)
        db.close()


def test_an_i_o_error_on_a_disk_with_no_block_left_is_a_507(tmp_path: Path) -> None:
    """With the store closed, SQLite's log and shared index are gone; on a disk then filled to the
    last block, a write cannot make the index (SQLITE_IOERR_SHMSIZE, not SQLITE_FULL): a full disk
    still, 507, and the store as it was once there is room again."""
    with small_disk(tmp_path / "disk", "8m") as disk:
        store = GlossaryStore(disk / "data")
        kept = store.create("me", "small", "en", "de", ENTRIES)
        with pytest.raises(OSError), (disk / "filler").open("wb") as filler:
            while True:
                filler.write(bytes(1 << 12))
                filler.flush()
        for write in (
            lambda: store.create("me", "more", "en", "de", ENTRIES),
            lambda: store.update("me", kept.glossary_id, entries=ENTRIES[:1]),
        ):
            with pytest.raises(OSError) as full:
                write()
            assert full.value.errno == errno.ENOSPC
            assert isinstance(io_error := full.value.__cause__, sqlite3.OperationalError)
            assert io_error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_IOERR
            with pytest.raises(InsufficientStorage):
                asyncio.run(stored(write))
        (disk / "filler").unlink()
        assert [g.name for g in store.list("me")] == ["small"] and store.entries("me", kept.glossary_id) == ENTRIES
