"""The SQL run history: `DatabaseRunHistory`, one row per fire in SQLite, PostgreSQL or
MySQL/MariaDB, for every provider that keeps its history in a SQL database.

* `store`: the store and its fenced writes; `driver`: the per-fire statements sent
  straight to the driver; `schema`: the table; `migration`: upgrades of an older table.
"""
