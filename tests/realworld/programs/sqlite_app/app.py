"""A small SQLite application: a table of notes, in rollback or WAL journal mode."""

import sqlite3
import sys

mode = sys.argv[1]
db = sqlite3.connect("notes.db")
db.execute(f"PRAGMA journal_mode={'WAL' if mode == 'wal' else 'DELETE'}")
db.execute("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT)")
with db:
    db.executemany("INSERT INTO notes (text) VALUES (?)", [("first",), ("second",)])
with db:
    db.execute("UPDATE notes SET text = 'changed' WHERE id = 1")
print([row for row in db.execute("SELECT id, text FROM notes ORDER BY id")])
db.close()
