"""Settings: sources, precedence, secrets, and errors that name the field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.config import load_settings
from service.errors import ConfigError


def test_defaults_work_for_the_demo() -> None:
    """With nothing configured the defaults point at the local services."""
    s = load_settings()
    assert s.kafka.bootstrap_servers == "127.0.0.1:19092"
    assert s.decoding.work_mem == 64 * 1024 * 1024
    assert s.transactional_id == "pgcdc-pgcdc"


def test_yaml_then_env_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """YAML sets values, PGCDC_* variables override them, and the YAML path does not leak."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("source:\n  port: 6000\n  slot: from_yaml\ndecoding:\n  work_mem: 16MB\n")
    monkeypatch.setenv("PGCDC_SOURCE__SLOT", "from_env")
    s = load_settings(cfg)
    assert (s.source.port, s.source.slot, s.decoding.work_mem) == (6000, "from_env", 16_000_000)
    assert "PGCDC_CONFIG" not in os.environ
    assert load_settings().source.port == 5432


def test_secret_files_and_redaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file per secret in PGCDC_SECRETS_DIR is read; it never shows in redacted output."""
    (tmp_path / "source__password").write_text("hunter2")
    monkeypatch.setenv("PGCDC_SECRETS_DIR", str(tmp_path))
    s = load_settings()
    assert s.source.password is not None
    assert s.source.password.get_secret_value() == "hunter2"
    assert "hunter2" not in str(s.redacted())
    assert "password=hunter2" in s.source.dsn()


@pytest.mark.parametrize(
    ("yaml_text", "field"),
    [
        ("source:\n  port: 0\n", "source.port"),
        ("source:\n  slot: Bad-Name\n", "source.slot"),
        ("kafka:\n  max_batch_txns: 0\n", "kafka.max_batch_txns"),
        ("kafka:\n  compression_type: brotli\n", "kafka.compression_type"),
        ("snapshot:\n  mode: sometimes\n", "snapshot.mode"),
        ("decoding:\n  memory_accounting: rss\n", "decoding.memory_accounting"),
        ("nonsense: 1\n", "nonsense"),
        ("source: [1, 2\n", "--config"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, yaml_text: str, field: str) -> None:
    """Each malformed value is a ConfigError whose field is the dotted setting name."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert info.value.field == field


def test_toast_settings_default_to_fill_and_reject_unknown_values() -> None:
    """toast.unchanged defaults to fill (issue 32); an unknown mode or a non-positive
    max_hold_s is a ConfigError naming the dotted field."""
    s = load_settings()
    assert (s.toast.unchanged, s.toast.max_hold_s) == ("fill", 600.0)
    assert load_settings(toast={"unchanged": "placeholder"}).toast.unchanged == "placeholder"
    with pytest.raises(ConfigError) as info:
        load_settings(toast={"unchanged": "null"})
    assert info.value.field == "toast.unchanged"
    with pytest.raises(ConfigError) as info:
        load_settings(toast={"max_hold_s": 0})
    assert info.value.field == "toast.max_hold_s"


def test_source_archive_is_a_directory_or_a_restore_command(tmp_path: Path) -> None:
    """source.archive: an existing directory, or a restore command with %f and %p;
    empty is unset; anything else is a ConfigError naming source.archive."""
    assert load_settings(source={"archive": str(tmp_path)}).source.archive == str(tmp_path)
    cmd = "cp /mnt/archive/%f %p"
    assert load_settings(source={"archive": cmd}).source.archive == cmd
    assert load_settings(source={"archive": ""}).source.archive is None
    assert load_settings().source.archive is None
    for bad, words in (
        (str(tmp_path / "absent"), "is not a directory"),
        ("cp /mnt/archive/%f /tmp/x", "lacks %p"),
        ("cp /mnt/%f %p %r", "%r"),
    ):
        with pytest.raises(ConfigError, match=words) as exc:
            load_settings(source={"archive": bad})
        assert exc.value.field == "source.archive"
