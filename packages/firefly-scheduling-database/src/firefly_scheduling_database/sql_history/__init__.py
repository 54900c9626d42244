"""The SQL run history: `SqlRunHistory`, one row per fire in SQLite, PostgreSQL or
MySQL/MariaDB, for every provider that keeps its history in a SQL database (the
`database` provider's own, and the `postgres` and `mysql` providers' by default).

* `store`: the store and its writes; `reads`: its reads; `table_access`: the table
  checked once, the paths its statements take, and the error handling;
* `statements`: the statements a fire sends, built once, and the conditional
  updates that carry the port's race rules; `array_statements`: PostgreSQL's batches
  as one statement over arrays; `batch_writes`: writes of many records at once;
  `queries`: the operators' reads and clean-ups;
* `rows`: the records as the store binds and reads them; `driver`: the per-fire
  statements sent straight to the driver;
* `schema`: the table; `migration`: upgrades of an older table;
* `in_transaction`: a run's success written through the task's own connection
  (`current_fire().atomic`): its guarded statement (`success_statement`), the check
  that the connection reaches this database (`same_database`), and the caller's
  transaction per client (`caller_sqlalchemy`, `caller_psycopg`, `caller_django`).
"""
