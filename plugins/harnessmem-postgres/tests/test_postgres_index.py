"""The ``postgres`` index backend: the conformance suite against the real server, plus
what only a shared database has (workspaces side by side, migrations, replicas)."""

from __future__ import annotations

import logging
import math
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.backends import IndexBackend
from harnessmem.errors import ConfigError, HarnessMemError
from harnessmem.index import chunk_markdown, content_hash
from harnessmem.plugins import index_registry
from harnessmem.testing import IndexBackendSuite
from harnessmem.testing.index_suite import MEMORY, sync_text
from harnessmem_postgres import IndexUnavailable, PostgresIndex, _schema

Sql = Callable[..., list[tuple[Any, ...]]]

pytestmark = pytest.mark.postgres


class TestPostgresIndexConformance(IndexBackendSuite):
    @pytest.fixture
    def index(self, pg_options: dict[str, Any]) -> Iterator[IndexBackend]:
        backend = PostgresIndex.create(pg_options)
        yield backend
        backend.close()

    def damage(self, index: IndexBackend) -> None:
        """Drop the schema (every workspace's tables); the next call rebuilds them."""
        assert isinstance(index, PostgresIndex)
        with index._engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{index.schema}" CASCADE')


@pytest.fixture
def index(pg_options: dict[str, Any]) -> Iterator[PostgresIndex]:
    backend = PostgresIndex.create(pg_options)
    yield backend
    backend.close()


# -- configuration -----------------------------------------------------------------------------


def test_registered_as_the_postgres_entry_point() -> None:
    assert index_registry().load("postgres") is PostgresIndex


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"schema": "Bad-Name"}, r"index\.options\.schema"),
        ({"text_search_config": "english; drop"}, r"index\.options\.text_search_config"),
        ({"pool_size": 0}, r"index\.options\.pool_size"),
        ({"urll": "x"}, r"index\.options\.urll"),
        ({"url": "mysql://u@h/db"}, r"index\.options\.url.*psycopg"),
    ],
)
def test_options_are_validated_with_their_dotted_path(options: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        PostgresIndex.create({"workspace_id": "w", **options})


def test_a_password_never_shows_in_an_options_error() -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresIndex.create({"workspace_id": "w", "url": "postgresql+asyncpg://u:s3cret@h/db"})
    assert "s3cret" not in str(caught.value)
    assert "s3cret" not in " ".join(caught.value.problems)
    assert "u:***@h" in str(caught.value)


def test_plain_postgresql_urls_mean_psycopg() -> None:
    options = PostgresIndex.parse_options({"url": "postgres://u@h:5433/db"}, where="index.options")
    assert options.url == "postgresql+psycopg://u@h:5433/db"


def test_a_workspace_id_is_needed_without_a_workspace(pg_url: str, pg_schema: str) -> None:
    """Built without one, an instance serves no workspace: it is there to be scoped."""
    store = PostgresIndex.create({"url": pg_url, "schema": pg_schema})
    try:
        with pytest.raises(ConfigError, match="workspace_id"):
            store.files()
        with pytest.raises(ConfigError, match="workspace_id"):
            store.search("anything")
        scoped = store.scoped("tenant-a")
        sync_text(scoped, "MEMORY.md", MEMORY)
        assert [h.path for h in scoped.search("Alice")] == ["MEMORY.md"]
        scoped.close()
    finally:
        store.close()


def test_an_unknown_text_search_config_lists_the_known_ones(
    pg_options: dict[str, Any],
) -> None:
    with pytest.raises(ConfigError, match="klingon") as caught:
        PostgresIndex.create({**pg_options, "text_search_config": "klingon"})
    assert "english" in str(caught.value)
    assert "simple" in str(caught.value)


def test_an_unreachable_server_is_a_clear_error() -> None:
    # Port 1 on loopback: refused at once, nothing leaves the machine.
    with pytest.raises(IndexUnavailable, match=r"127\.0\.0\.1") as caught:
        PostgresIndex.create(
            {
                "url": "postgresql+psycopg://u:pw@127.0.0.1:1/db",
                "workspace_id": "w",
                "connect_timeout": 1,
            }
        )
    assert "pw" not in str(caught.value)
    assert "PGHOST" in str(caught.value), "the hint names where settings come from"


def test_url_parts_come_from_the_libpq_environment(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(pg_url)
    monkeypatch.setenv("PGHOST", str(url.host))
    monkeypatch.setenv("PGPORT", str(url.port or 5432))
    monkeypatch.setenv("PGUSER", str(url.username))
    monkeypatch.setenv("PGDATABASE", str(url.database))
    backend = PostgresIndex.create({"schema": pg_schema, "workspace_id": "from-env"})
    try:
        sync_text(backend, "MEMORY.md", MEMORY)
        assert backend.search("Alice")[0].path == "MEMORY.md"
        assert backend.url == "postgresql+psycopg://"
    finally:
        backend.close()


# -- workspaces side by side -------------------------------------------------------------------


def test_workspaces_in_one_database_never_see_each_other(pg_options: dict[str, Any]) -> None:
    one = PostgresIndex.create({**pg_options, "workspace_id": pg_options["workspace_id"] + "-a"})
    two = PostgresIndex.create({**pg_options, "workspace_id": pg_options["workspace_id"] + "-b"})
    try:
        sync_text(one, "MEMORY.md", "- the otter lives in workspace one\n")
        sync_text(two, "MEMORY.md", "- the beaver lives in workspace two\n")
        assert [h.content for h in one.search("otter beaver")] == [
            "- the otter lives in workspace one"
        ]
        assert [h.content for h in two.search("otter beaver")] == [
            "- the beaver lives in workspace two"
        ]
        one.clear()
        assert one.files() == {}
        assert set(two.files()) == {"MEMORY.md"}, "clear empties only its own workspace"
        assert two.stats().entries == 1
        assert two.resets == 0
    finally:
        one.close()
        two.close()


def test_the_workspace_id_is_the_workspace_url(pg_url: str, pg_schema: str, tmp_path: Path) -> None:
    options = {"backend": "postgres", "options": {"url": pg_url, "schema": pg_schema}}
    (tmp_path / "a" / "memory").mkdir(parents=True)
    (tmp_path / "a" / "memory" / "2026-01-01.md").write_text("- the quokka smiles\n")
    (tmp_path / "b").mkdir()
    opened: dict[str, Any] = {
        "maintenance": {"enabled": False},
        "plugins": {"autoload": False},
        "config": None,
    }
    with MemoryHarness.open(tmp_path / "a", index=options, **opened) as first:
        assert [h.path for h in first.search("quokka")] == ["memory/2026-01-01.md"]
        backend = first.kernel.index
        assert isinstance(backend, PostgresIndex)
        assert backend.workspace_id == first.workspace.url
    with MemoryHarness.open(tmp_path / "a", index=options, **opened) as again:
        assert again.reindex().indexed == 0, "a second harness finds the file indexed"
    with MemoryHarness.open(tmp_path / "b", index=options, **opened) as other:
        assert other.search("quokka") == []


def test_credentials_are_not_part_of_a_derived_workspace_id() -> None:
    from harnessmem_postgres.options import PostgresIndexOptions, workspace_key

    class Workspace:
        url = "ftp://user:secret@files.example/agent"

    key = workspace_key(PostgresIndexOptions(), {"workspace": Workspace()})
    assert key == "ftp://files.example/agent"


# -- schema and self-repair --------------------------------------------------------------------


def test_tables_are_created_and_versioned(
    pg_url: str, fresh_schema: str, pg_sql: Sql, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="harnessmem.index")
    PostgresIndex.create({"url": pg_url, "schema": fresh_schema, "workspace_id": "w"}).close()
    rows = pg_sql(f'SELECT version FROM "{fresh_schema}".schema_version ORDER BY version')
    assert [row[0] for row in rows] == [m.version for m in _schema.MIGRATIONS]
    assert any("migrated to version 1" in r.getMessage() for r in caplog.records)
    caplog.clear()
    PostgresIndex.create({"url": pg_url, "schema": fresh_schema, "workspace_id": "w"}).close()
    assert caplog.records == [], "an up-to-date schema opens silently"


def test_a_later_migration_is_applied_once(
    pg_url: str, fresh_schema: str, pg_sql: Sql, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"url": pg_url, "schema": fresh_schema, "workspace_id": "w"}
    first = PostgresIndex.create(options)
    sync_text(first, "MEMORY.md", MEMORY)
    first.close()
    latest = _schema.LATEST_VERSION
    step = _schema.Migration(
        latest + 1, "a test column", ("ALTER TABLE {s}.files ADD COLUMN note text",)
    )
    monkeypatch.setattr(_schema, "MIGRATIONS", (*_schema.MIGRATIONS, step))
    opened: list[PostgresIndex] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(PostgresIndex.create(options))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        versions = pg_sql(f'SELECT version FROM "{fresh_schema}".schema_version ORDER BY 1')
        assert [v[0] for v in versions] == [*range(1, latest + 1), latest + 1]
        assert opened[0].search("Alice"), "data survives a migration"
    finally:
        for backend in opened:
            backend.close()


def test_a_newer_schema_is_refused_not_touched(pg_url: str, fresh_schema: str, pg_sql: Sql) -> None:
    options = {"url": pg_url, "schema": fresh_schema, "workspace_id": "w"}
    PostgresIndex.create(options).close()
    pg_sql(f'INSERT INTO "{fresh_schema}".schema_version VALUES (99, %s)', "from the future")
    with pytest.raises(HarnessMemError, match="version 99, newer") as caught:
        PostgresIndex.create(options)
    assert "upgrade harnessmem-postgres" in str(caught.value)
    count = pg_sql(f'SELECT count(*) FROM "{fresh_schema}".schema_version')[0][0]
    assert count == len(_schema.MIGRATIONS) + 1


def test_dropped_tables_are_rebuilt(
    pg_url: str, fresh_schema: str, pg_sql: Sql, caplog: pytest.LogCaptureFixture
) -> None:
    backend = PostgresIndex.create({"url": pg_url, "schema": fresh_schema, "workspace_id": "w"})
    try:
        sync_text(backend, "MEMORY.md", MEMORY)
        pg_sql(f'DROP SCHEMA "{fresh_schema}" CASCADE')
        caplog.set_level(logging.WARNING, logger="harnessmem.index")
        assert backend.search("Alice") == [], "a new, empty index: nothing to find yet"
        assert backend.resets == 1
        assert any("were missing; rebuilt them" in r.getMessage() for r in caplog.records)
        sync_text(backend, "MEMORY.md", MEMORY)
        assert backend.search("Alice")
    finally:
        backend.close()


def test_a_dropped_connection_is_retried_on_a_fresh_one(
    pg_options: dict[str, Any], pg_sql: Sql
) -> None:
    """The server restarting (or a proxy closing idle connections) costs no error."""
    name = f"hm-test-{uuid.uuid4().hex[:12]}"
    backend = PostgresIndex.create({**pg_options, "application_name": name})
    try:
        sync_text(backend, "MEMORY.md", MEMORY)
        assert backend.search("Alice")
        killed = pg_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            name,
        )
        assert killed, "the pool held a connection"
        assert [h.path for h in backend.search("Alice")] == ["MEMORY.md"]
        assert sync_text(backend, "MEMORY.md", MEMORY + "- one more line\n") is True
    finally:
        backend.close()


def test_a_clear_by_another_replica_is_noticed(pg_options: dict[str, Any]) -> None:
    one, two = PostgresIndex.create(pg_options), PostgresIndex.create(pg_options)
    try:
        sync_text(one, "MEMORY.md", MEMORY)
        assert two.search("Alice")
        one.clear()
        assert one.resets == 0, "its own clear is no surprise"
        assert two.search("Alice") == []
        assert two.resets == 1, "the other replica's harness must hand every file again"
        assert two.search("Alice") == []
        assert two.resets == 1, "counted once"
    finally:
        one.close()
        two.close()


def test_another_text_search_config_empties_the_workspace(
    pg_options: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    english = PostgresIndex.create(pg_options)
    sync_text(english, "MEMORY.md", "- She runs every morning\n")
    english.close()
    caplog.set_level(logging.WARNING, logger="harnessmem.index")
    simple = PostgresIndex.create({**pg_options, "text_search_config": "simple"})
    try:
        assert simple.resets == 1
        assert simple.files() == {}
        assert "'english', not 'simple'" in caplog.records[0].getMessage()
        assert "stemming" not in simple.capabilities
        sync_text(simple, "MEMORY.md", "- She runs every morning\n- Die Läufer laufen\n")
        assert simple.search("running") == [], "simple does not stem"
        assert [h.start_line for h in simple.search("laufer")] == [2], "but folds diacritics"
        assert [h.start_line for h in simple.search("every")] == [1], "and keeps all words"
    finally:
        simple.close()


# -- writing -----------------------------------------------------------------------------------


def test_an_append_writes_only_the_new_rows(index: PostgresIndex, pg_sql: Sql) -> None:
    text = "".join(f"- fact {i}\n" for i in range(5))
    sync_text(index, "memory/2026-01-01.md", text)
    query = f'SELECT id, content FROM "{index.schema}".entries WHERE workspace_no = %s ORDER BY id'
    before = pg_sql(query, index._workspace_no)
    sync_text(index, "memory/2026-01-01.md", "An intro.\n\n" + text + "- fact 5\n")
    after = pg_sql(query, index._workspace_no)
    assert after[:5] == before, "unchanged entries keep their rows"
    assert sorted(row[1] for row in after[5:]) == ["- fact 5", "An intro."]
    assert [h.start_line for h in index.search("fact 5", mode="phrase")] == [8]
    assert [h.start_line for h in index.search("fact 0", mode="phrase")] == [3], "lines moved"


def test_a_file_is_indexed_once_when_replicas_sync_it_together(
    pg_options: dict[str, Any],
) -> None:
    """Replicas handing the same new version at once: one indexes it, the others skip."""
    replicas = [PostgresIndex.create(pg_options) for _ in range(4)]
    text = "".join(f"- shared line {i}\n" for i in range(200))
    results: list[bool] = []
    barrier = threading.Barrier(len(replicas))

    def sync(backend: PostgresIndex, token: str) -> None:
        barrier.wait()
        results.append(sync_text(backend, "memory/2026-02-02.md", text, token=token))

    threads = [
        threading.Thread(target=sync, args=(backend, f"etag-{n}"))
        for n, backend in enumerate(replicas)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == [False, False, False, True]
        assert replicas[0].stats().entries == 200, "never duplicated"
        assert len(replicas[1].search("shared line", limit=50, mode="all")) == 50
    finally:
        for backend in replicas:
            backend.close()


def test_a_writer_waits_no_longer_than_lock_timeout(
    pg_options: dict[str, Any], pg_url: str
) -> None:
    import psycopg

    from harnessmem_postgres._schema import advisory_key

    backend = PostgresIndex.create({**pg_options, "lock_timeout": 0.2})
    key = advisory_key("file", backend.schema, backend._workspace_no, "MEMORY.md")
    from sqlalchemy.engine import make_url

    libpq = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with psycopg.connect(libpq) as holder:
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            with pytest.raises(IndexUnavailable, match="lock_timeout"):
                sync_text(backend, "MEMORY.md", MEMORY)
        assert sync_text(backend, "MEMORY.md", MEMORY) is True, "fine once the lock is gone"
    finally:
        backend.close()


def test_text_postgres_cannot_store_is_cleaned(index: PostgresIndex) -> None:
    entries = chunk_markdown("MEMORY.md", "- nul\x00inside and a lone \ud800 surrogate\n")
    assert index.sync_file("MEMORY.md", "h1", entries) is True
    (hit,) = index.search("surrogate")
    assert "\x00" not in hit.content
    assert "\ud800" not in hit.content
    assert index.sync_file("MEMORY.md", "h1", entries) is False


# -- searching ---------------------------------------------------------------------------------


def test_rare_words_outweigh_common_ones(index: PostgresIndex) -> None:
    """Like bm25: two matching words that are everywhere lose to one rare word."""
    text = "".join(f"- Caroline said she would go there {i}\n" for i in range(30))
    text += "- the LGBTQ support group meets on Fridays\n"
    sync_text(index, "memory/2026-03-03.md", text)
    hits = index.search("When did Caroline go to the LGBTQ support group?", limit=3)
    assert hits[0].content == "- the LGBTQ support group meets on Fridays"


def test_a_score_is_the_idf_weighted_rank_of_each_term(index: PostgresIndex) -> None:
    """The ranking statement spells out one share per term: a hit's score is the sum, over
    the query's terms, of the term's idf times ts_rank_cd of the entry for that term (a
    word without a lexeme, as a stop word, adds nothing), recounted here term by term."""
    from sqlalchemy import text

    from harnessmem_postgres._search import WEIGHTS

    lines = [f"- Caroline went hiking near the lake on day {i}" for i in range(12)]
    lines += ["- Melanie painted the lake at sunrise", "- Caroline and Melanie met at the lake"]
    lines += ["- Melanie swam in the lake, walked round the lake, slept by the lake"]
    sync_text(index, "memory/2026-03-03.md", "".join(f"{line}\n" for line in lines))
    entries = f"{index._quoted}.entries"
    where = "workspace_no = :ws AND source = 'memory'"
    term_sql = text(
        f"SELECT (SELECT count(*) FROM {entries} WHERE {where} "
        "AND tsv @@ to_tsquery('english', :t)), "
        f"(SELECT ts_rank_cd(CAST(:w AS float4[]), tsv, to_tsquery('english', :t)) "
        f"FROM {entries} WHERE {where} AND start_line = :line)"
    )
    checked = 0
    with index._engine.connect() as conn:
        ws = index._workspace_no
        total = conn.execute(text(f"SELECT count(*) FROM {entries} WHERE {where}"), {"ws": ws})
        size = total.scalar_one()
        for query in ["Caroline lake", "Melanie lake the", "lake hiking day", "sunrise"]:
            hits = index.search(query, limit=20, mode="all")
            assert hits, query
            for hit in hits:
                expected = 0.0
                for term in query.lower().split():
                    row = conn.execute(
                        term_sql, {"ws": ws, "t": term, "w": WEIGHTS, "line": hit.start_line}
                    ).one()
                    df, rank = row
                    expected += math.log(1 + (size - df + 0.5) / (df + 0.5)) * (rank or 0.0)
                assert hit.score == pytest.approx(expected, abs=1e-5), (query, hit)
                checked += 1
    assert checked >= 15


def test_words_joined_by_punctuation_are_one_phrase(index: PostgresIndex) -> None:
    sync_text(index, "MEMORY.md", "- switched to gpt-4o on 2026-11-30\n- 4o and gpt apart\n")
    assert [h.start_line for h in index.search("gpt-4o")][:1] == [1]
    assert [h.start_line for h in index.search("2026-11-30")] == [1]


def test_stop_words_keep_their_place_in_phrases(index: PostgresIndex) -> None:
    """'english' does not index stop words, but a phrase still spans them."""
    sync_text(index, "MEMORY.md", "- a seat by the aisle\n- the aisle seat by a window\n")
    assert [h.start_line for h in index.search("seat by the aisle", mode="phrase")] == [1]
    assert [h.start_line for h in index.search("seat aisle", mode="phrase")] == []


def test_arguments_are_checked_as_every_backend_checks_them(index: PostgresIndex) -> None:
    """Through ``IndexBackend._search_terms`` and ``_check_source``: the sqlite errors."""
    with pytest.raises(ValueError, match=r"^unknown index source 'notes'; expected one of"):
        index.search("kyoto", source="notes")
    with pytest.raises(ValueError, match=r"^unknown search mode 'fuzzy'; expected 'any', 'all'"):
        index.search("kyoto", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^a query is a str, got bytes$"):
        index.search(b"kyoto")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown index source 'notes'"):
        index.sync_file("a.md", "h", [], source="notes")
    assert index.search(None, limit=0) == []  # type: ignore[arg-type]
    assert index.files() == {}


def test_a_harness_searches_through_postgres(pg_options: dict[str, Any], tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "2026-04-04.md").write_text("## Trip\n- Booked the Kyoto ryokan\n")
    with MemoryHarness.open(
        root,
        index={"backend": "postgres", "options": pg_options},
        maintenance={"enabled": False},
        plugins={"autoload": False},
        config=None,
    ) as harness:
        (hit,) = harness.search("ryokan")
        assert (hit.path, hit.start_line, hit.end_line, hit.context) == (
            "memory/2026-04-04.md",
            2,
            2,
            "Trip",
        )
        assert hit.date == "2026-04-04"
        stats = harness.kernel.index.stats()
        assert stats.files == 1
        assert stats.details["workspace_id"] == pg_options["workspace_id"]
        assert "***" not in stats.details["url"]
        assert stats.details["schema_version"] == _schema.LATEST_VERSION == 2
        assert (
            content_hash(b"") != harness.kernel.index.files()["memory/2026-04-04.md"].content_hash
        )
