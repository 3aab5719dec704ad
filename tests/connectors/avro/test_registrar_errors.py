"""How `Registrar` classifies the registry's errors (pure logic: the client is a stub
that answers with the errors the real registry gives; tests/integration covers the real
one).

- a 4xx of a registration or of the compatibility setting is raised at once, also
  404 40403 "No content with ID" (Apicurio's orphaned content row: it does not heal by
  retrying, as CI showed for 300 s);
- 409 is a rejection (RegistryRejectedError), as before;
- 401 is RegistryAuthError (fatal), naming registry.basic_auth.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from connectors.avro import plugin
from connectors.avro.plugin import Registrar
from service.config import Settings
from service.errors import RegistryAuthError, RegistryRejectedError

SCHEMA = {"type": "record", "name": "X", "fields": [{"name": "a", "type": "int"}]}
GONE = SchemaRegistryError(404, 40403, "No content with ID '426' was found.")


class _Client:
    """Answers `register_schema` from `answers` in turn (an exception is raised)."""

    def __init__(self, *answers: Any, compat_error: Exception | None = None) -> None:
        self.answers = list(answers)
        self.compat_error = compat_error  # raised by set_compatibility (a new subject)
        self.registrations = 0

    def get_versions(self, subject: str) -> Any:
        return [] if self.compat_error is not None else [1]

    def set_compatibility(self, subject: str, level: str) -> None:
        if self.compat_error is not None:
            raise self.compat_error

    def register_schema(self, subject: str, schema: Any) -> int:
        self.registrations += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return int(answer)

    def close(self) -> None:
        pass


def _registrar(client: _Client, budget: float = 5.0) -> Registrar:
    settings = Settings(
        source={"slot": "s", "dbname": "d"},
        kafka={"bootstrap_servers": "127.0.0.1:9", "topic_prefix": "p"},
        registry={"url": "http://127.0.0.1:9"},
    )
    reg = Registrar(settings, retry_budget_s=budget)
    reg.client = client  # type: ignore[assignment]
    return reg


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin, "_BACKOFF_START_S", 0.01)
    monkeypatch.setattr(plugin, "_BACKOFF_MAX_S", 0.05)


_NOT_FOUND = SchemaRegistryError(404, 40401, "Subject 't-value' not found.")
_UNAUTHORIZED = SchemaRegistryError(401, 40101, "Unauthorized")
_BAD = SchemaRegistryError(400, 40000, "Bad request")


@pytest.mark.parametrize(
    ("client", "error", "registrations"),
    [
        # other 4xx of a registration
        (_Client(_NOT_FOUND), _NOT_FOUND, 1),
        (_Client(_BAD), _BAD, 1),
        (_Client(GONE), GONE, 1),
        # the new subject's compatibility setting
        (_Client(1, compat_error=GONE), GONE, 0),
    ],
    ids=["404-subject", "400", "40403", "40403-at-compatibility"],
)
def test_other_client_errors_are_raised_at_once(
    client: _Client, error: SchemaRegistryError, registrations: int
) -> None:
    reg = _registrar(client)
    with pytest.raises(SchemaRegistryError) as excinfo:
        reg.serializer("t", False, SCHEMA)
    assert excinfo.value is error
    assert client.registrations == registrations


def test_unauthorized_is_a_fatal_auth_error_at_once() -> None:
    """A 401 is raised at once as RegistryAuthError naming registry.basic_auth, chained
    from the registry's error (tests/integration/test_tls_failures.py: a real one)."""
    client = _Client(_UNAUTHORIZED)
    with pytest.raises(RegistryAuthError) as excinfo:
        _registrar(client).serializer("t", False, SCHEMA)
    assert excinfo.value.field == "registry.basic_auth"
    assert excinfo.value.__cause__ is _UNAUTHORIZED
    assert client.registrations == 1


def test_incompatible_schema_is_a_rejection() -> None:
    reg = _registrar(_Client(SchemaRegistryError(409, 40901, "incompatible")))
    with pytest.raises(RegistryRejectedError, match="rejected the registration of subject t-value"):
        reg.serializer("t", False, SCHEMA)
