"""Which client character sets and encodings the SQL adapters accept (no server)."""

from __future__ import annotations

import pytest

from firefly_scheduling.urls.client_encodings import ascii_text_problem, libpq_encoding_problem


@pytest.mark.parametrize("encoding", ["utf8", "gbk", "big5", "sjis", "cp932", "cp1252", "ujis"])
def test_codecs_that_write_ascii_as_ascii_carry_the_statements(encoding: str) -> None:
    assert ascii_text_problem(encoding) is None


@pytest.mark.parametrize(
    ("encoding", "problem"),
    [
        ("swe7", "no codec 'swe7'"),
        ("utf-16", "cannot write ASCII"),
        ("cp037", "does not write ASCII as ASCII"),  # EBCDIC
    ],
)
def test_other_codecs_are_refused_naming_them(encoding: str, problem: str) -> None:
    found = ascii_text_problem(encoding)
    assert found is not None
    assert problem in found


@pytest.mark.parametrize(
    ("parameter", "options"),
    [
        (None, None),
        ("UTF8", None),
        ("utf-8", "-c statement_timeout=5s"),
        ("Unicode", "-c client_encoding=UTF8"),
        (None, "--client-encoding=utf8 -c search_path=app"),
    ],
)
def test_libpq_utf8_in_any_spelling_is_accepted(parameter: str | None, options: str | None) -> None:
    assert libpq_encoding_problem(parameter, options) is None


@pytest.mark.parametrize(
    ("parameter", "options", "named"),
    [
        ("SJIS", None, "client_encoding=SJIS"),
        ("LATIN1", "-c statement_timeout=5s", "client_encoding=LATIN1"),
        (None, "-c client_encoding=SQL_ASCII", "client_encoding=SQL_ASCII"),
        (None, "-cclient_encoding=BIG5", "client_encoding=BIG5"),
        ("UTF8", "--client_encoding=WIN1252", "client_encoding=WIN1252"),
    ],
)
def test_another_libpq_encoding_is_refused_naming_it(
    parameter: str | None, options: str | None, named: str
) -> None:
    problem = libpq_encoding_problem(parameter, options)
    assert problem is not None
    assert named in problem
