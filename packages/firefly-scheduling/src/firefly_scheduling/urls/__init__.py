"""Connection URLs, shared by every lock, anchor store and history store.

* `connection_url.parse_lock_url`: split and check a backend URL, naming what is wrong.
* `redaction`: `redact_url`, `url_secrets` and `scrub`, so that no password ever
  reaches a log line, an exception or a `repr`.
* `client_encodings.ascii_text_problem`: whether a client character set can carry
  the SQL adapters' statements (all ASCII).

General helpers rather than lock code: the settings, the stores and the adapters'
own modules use them alike. Nothing is imported here.
"""
