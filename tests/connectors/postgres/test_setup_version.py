"""Unit tests of setup's version gate and the DDL script assembly (no server needed)."""

from __future__ import annotations

import pytest

from connectors.postgres.setup import check_version, ddl_capture_sql
from service.errors import SourceSetupError


@pytest.mark.parametrize("num,major", [(150004, 15), (160000, 16), (170002, 17), (180001, 18)])
def test_supported_versions(num: int, major: int) -> None:
    """15..18 are accepted and reduced to their major version."""
    assert check_version(num) == major


@pytest.mark.parametrize("num", [140011, 130000, 190000, 90624])
def test_unsupported_versions_are_refused_by_name(num: int) -> None:
    """Any other major version is refused with a message naming it and the range."""
    with pytest.raises(
        SourceSetupError, match=rf"PostgreSQL {num // 10000} is not supported.*15\.\.18"
    ):
        check_version(num)


def test_ddl_script_inlines_the_shared_definition_query() -> None:
    """The installed table_def function body is the catalog stage's own query."""
    script = ddl_capture_sql()
    assert "{table_def}" not in script
    assert "json_build_object(\n    'oid', c.oid::int8" in script
    assert "SECURITY DEFINER" in script and "SET search_path = pg_catalog, pg_temp" in script
