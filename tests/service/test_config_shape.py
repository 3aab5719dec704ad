"""A settings file that is not a mapping is a ConfigError naming the file (issue 11,
defect 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.config import load_settings
from service.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "what"),
    [("", "empty"), ("# only a comment\n", "empty"), ("- source\n- kafka\n", "a list")],
)
def test_yaml_that_is_not_a_mapping_is_a_config_error(tmp_path: Path, text: str, what: str) -> None:
    """An empty file (or one with only comments) and a YAML list both fail with a
    ConfigError whose message names the file and says what it is."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert str(path) in str(info.value) and what in str(info.value)


def test_yaml_via_environment_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PGCDC_CONFIG pointing at a list fails the same way as --config."""
    path = tmp_path / "env.yaml"
    path.write_text("[1, 2]\n")
    monkeypatch.setenv("PGCDC_CONFIG", str(path))
    with pytest.raises(ConfigError, match="a list"):
        load_settings()
