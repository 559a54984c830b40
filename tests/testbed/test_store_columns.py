"""The store's column descriptions (testbed/records/columns.py) name exactly the columns a
store has, in the order it has them: a new store, and an old one migrated on opening."""
import shutil
import sqlite3
from pathlib import Path

from testbed.records.columns import COLUMNS, TABLE_MEANINGS
from testbed.records.store import ADDED_COLUMNS, TABLES, Store


def columns_of(db, table):
    return [r[1] for r in db.execute(f"pragma table_info({table})")]


def test_a_new_store_has_exactly_the_described_columns(tmp_path):
    with Store(str(tmp_path / "new.db")) as store:
        for table in TABLES:
            assert columns_of(store.db, table) == list(COLUMNS[table]), table
    assert set(COLUMNS) == set(TABLES) == set(TABLE_MEANINGS)


def test_an_old_store_gains_the_added_columns_in_the_described_order(tmp_path):
    path = tmp_path / "old.db"
    with Store(str(path)):
        pass
    db = sqlite3.connect(path)
    for table, added in ADDED_COLUMNS.items():
        for column in added:
            db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    db.commit()
    db.close()
    with Store(str(path)) as store:
        for table in TABLES:
            assert columns_of(store.db, table) == list(COLUMNS[table]), table


def test_every_column_says_what_it_means():
    assert [(t, c) for t, cols in COLUMNS.items() for c, col in cols.items() if not col.meaning] == []


def test_a_store_written_before_opens_with_its_rows_and_gains_the_described_columns(tmp_path):
    """checkpoint_format_1/dp.db, written by an earlier testbed (before `runs.trial`): read-only
    it reads `trial` as NULL; opened for writing it gains the column, its rows as they were."""
    shutil.copy(Path(__file__).parent / "checkpoint_format_1" / "dp.db", tmp_path / "dp.db")
    path = tmp_path / "dp.db"
    assert "trial" not in columns_of(sqlite3.connect(path), "runs")
    with Store(str(path), readonly=True) as store:
        before = {t: [tuple(r) for r in store.db.execute(f"select * from {t}")] for t in TABLES}
        assert [r["trial"] for r in store.runs()] == [None]
    assert len(before["iterations"]) == 15 and len(before["links"]) == 120
    with Store(str(path)) as store:
        for table in TABLES:
            assert columns_of(store.db, table) == list(COLUMNS[table]), table
            after = store.db.execute(f"select * from {table}").fetchall()
            assert [tuple(r)[:len(b)] for r, b in zip(after, before[table])] == before[table]
        assert [r["trial"] for r in store.runs()] == [None]


def test_a_new_store_has_the_types_keys_and_indexes_of_a_store_written_before(tmp_path):
    """The DDL made from the declaration against checkpoint_format_1/dp.db's, written by an
    earlier testbed from its hand-written SQL: every column that store has, with its type,
    NOT NULL, default and place in the key; and the same indexes."""
    shutil.copy(Path(__file__).parent / "checkpoint_format_1" / "dp.db", tmp_path / "old.db")
    old = sqlite3.connect(tmp_path / "old.db")   # a copy: opening the stored file leaves -wal/-shm
    with Store(str(tmp_path / "new.db")) as store:
        for table in TABLES:
            was = list(old.execute(f"pragma table_info({table})"))
            assert was, table
            now = list(store.db.execute(f"pragma table_info({table})"))[:len(was)]
            assert [tuple(r) for r in now] == was, table
            indexes = [(r[1], r[2], r[3]) for r in old.execute(f"pragma index_list({table})")]
            assert [tuple(r)[1:4] for r in store.db.execute(f"pragma index_list({table})")] == indexes
    old.close()
