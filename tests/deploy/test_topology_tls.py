"""The shipped topology with TLS on all three connections, run as Compose and Kubernetes
would run it, against the TLS-only instances of deploy/local/svc_tls.py (15, then 18).

Compose: docker-compose.yml with docker-compose.tls.yml merged over it as compose merges
them; the postgres service's init script with the merged environment (the worker role's
password from its compose secret, pg_hba.conf made hostssl-only), `pgcdc-setup` and
`pgcdc` with their merged environments and their compose secrets and CA mounted.
Kubernetes: deploy/k8s/tls built as kustomize builds it, the `setup` init container and
the `pgcdc` container with the overlay's config and their Secrets as files. In both, the
worker publishes the init script's rows and later inserts over SASL_SSL (read back over
TLS), registers its schemas over HTTPS with basic auth, holds the slot as the init
script's role, whose SCRAM password the server checks, over TLS on every connection,
answers the healthcheck and exits 0 on SIGTERM.

These start and stop the TLS instances, so they run in the lane of
tests/integration/test_tls_*.py, never beside them (.ci/run). The files a user provides
(make-demo-tls.sh's, the Secrets) are written by the test with the instances' CA and
passwords; tests/deploy/topology_support.py and overlay_support.py say how the rest is
mapped. The static checks at the end need no service.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from tests.deploy.overlay_support import (
    K8S_TLS,
    compose_mounts,
    compose_tls,
    compose_tls_env,
    k8s_tls_config,
    k8s_tls_container,
    k8s_tls_mounts,
    k8s_tls_secret_modes,
)
from tests.deploy.topology_support import (
    DEPLOY,
    IMAGE_PG_HBA,
    K8S,
    Deployment,
    ImageTree,
    Mapping,
    check_role,
    compose_service,
    image_json,
    k8s_env,
    mapped,
    publishes_and_stops,
)
from tests.integration.tls_support import Wiring, kafka_section, registry_section, secret

COMPOSE_REGISTRY = "https://registry:8443/apis/ccompat/v7"
K8S_REGISTRY = "https://apicurio-registry.registry.svc.cluster.local:8443/apis/ccompat/v7"


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> ImageTree:
    return ImageTree.build(tmp_path_factory.mktemp("image"))


@pytest.fixture
def tls_deployment(
    image: ImageTree,
    tls_pg: dict[str, Any],
    tls_kafka: dict[str, Any],
    tls_registry: dict[str, Any],
    tmp_path: Path,
) -> Iterator[Deployment]:
    """A Deployment on the TLS instances; its readers connect by SASL_SSL and HTTPS."""
    wiring = Wiring("scram", "SCRAM-SHA-512", "env")
    reader = {
        "kafka": kafka_section(wiring, tls_kafka),
        "registry": registry_section(wiring, tls_registry, tmp_path),
    }
    endpoints = {
        "kafka:9094": str(tls_kafka["sasl_bootstrap"]),
        COMPOSE_REGISTRY: str(tls_registry["url"]),
    }
    m = Mapping(tls_pg, tls_kafka, tls_registry, tmp_path, endpoints=endpoints, reader=reader)
    d = Deployment(m, image)
    try:
        yield d
    finally:
        d.drop()


def _write(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _check_hostssl_only(d: Deployment) -> None:
    """The init script left no `host` line: every TCP line of the image's pg_hba.conf,
    and the role's replication line, is hostssl."""
    lines = (d.mapping.pgdata / "pg_hba.conf").read_text().splitlines()
    assert not [ln for ln in lines if re.match(r"host\s", ln)], lines
    image_tcp = [ln for ln in IMAGE_PG_HBA.splitlines() if ln.startswith("host")]
    assert [ln for ln in lines if ln.startswith("hostssl")][: len(image_tcp)] == [
        "hostssl" + ln[4:] for ln in image_tcp
    ]


@pytest.mark.integration
@pytest.mark.slow
def test_compose_tls_topology_publishes_rows(tls_deployment: Deployment) -> None:
    """docker-compose.yml + docker-compose.tls.yml as compose runs them: the init script
    with the merged postgres environment (role password from its secret, hostssl only),
    `pgcdc-setup` as the superuser by verify-full with its password secret, then `pgcdc`
    with the image's CMD and the merged environment (verify-full, SASL_SSL SCRAM-SHA-512,
    https registry with basic auth, every password a secret): rows reach Kafka over TLS
    on every connection, and SIGTERM ends the worker with exit 0."""
    d, m = tls_deployment, tls_deployment.mapping
    version = int(m.pg["version"])
    # What make-demo-tls.sh lays out next to the compose files, with the instances' CA
    # and passwords (the worker role's is the test's: the init script sets it).
    files = m.base / "compose-files"
    _write(files / "tls" / "ca.crt", Path(m.pg["ca"]).read_text(), 0o644)
    user_secrets = {
        "postgres-password": secret(m.pg),
        "pgcdc-db-password": secrets.token_hex(24),
        "kafka-sasl-password": secret(m.kafka),
        "registry-basic-auth": f"{m.registry['user']}:{secret(m.registry)}",
    }
    for name, value in user_secrets.items():
        _write(files / "secrets" / name, value + "\n", 0o644)

    postgres_env = compose_tls_env("postgres")
    assert postgres_env["PGCDC_HBA_HOSTSSL"] == "on"
    d.init_database(postgres_env, compose_mounts("postgres", files), IMAGE_PG_HBA)
    check_role(d, version, hba="hostssl")
    _check_hostssl_only(d)

    merged = compose_tls()["services"]
    setup, worker = merged["pgcdc-setup"], merged["pgcdc"]
    assert "command" not in worker  # the image's CMD
    m.config(
        yaml.safe_load((DEPLOY / "pgcdc" / "config.yaml").read_text()),
        "postgres",
        "kafka:9092",
        "http://registry:8080/apis/ccompat/v7",
    )
    setup_env = compose_tls_env("pgcdc-setup")
    report = json.loads(
        d.run_once(setup["command"], setup_env, compose_mounts("pgcdc-setup", files))
    )
    assert report["slot_created"] and report["ddl_capture_installed"], report
    assert report["server_version"] == version
    worker_env = compose_tls_env("pgcdc")
    assert worker_env["PGCDC_KAFKA__BOOTSTRAP_SERVERS"] in m.endpoints
    assert worker_env["PGCDC_REGISTRY__URL"] in m.endpoints
    publishes_and_stops(d, image_json("CMD"), worker_env, compose_mounts("pgcdc", files), tls=True)


@pytest.mark.integration
@pytest.mark.slow
def test_k8s_tls_topology_publishes_rows(tls_deployment: Deployment) -> None:
    """deploy/k8s/tls as kustomize builds it and the kubelet runs it: the Secrets as
    files (mode defaultMode), the `setup` init container as the superuser of
    pgcdc-setup-secrets by its password file, then the `pgcdc` container as the init
    script's role, with the overlay's config (verify-full, SASL_SSL, https registry,
    every password a file): rows reach Kafka over TLS on every connection, and SIGTERM
    ends the worker with exit 0."""
    d, m = tls_deployment, tls_deployment.mapping
    version = int(m.pg["version"])
    role_password = secrets.token_hex(24)
    values = {
        ("pgcdc-tls", "ca.crt"): Path(m.pg["ca"]).read_text(),
        ("pgcdc-tls", "tls.crt"): Path(m.pg["client_cert"]).read_text(),
        ("pgcdc-tls", "tls.key"): Path(m.pg["client_key"]).read_text(),
        ("pgcdc-secrets", "source-password"): role_password,
        ("pgcdc-secrets", "kafka-sasl-password"): secret(m.kafka),
        ("pgcdc-secrets", "registry-basic-auth"): f"{m.registry['user']}:{secret(m.registry)}",
        ("pgcdc-setup-secrets", "source-user"): "postgres",
        ("pgcdc-setup-secrets", "source-password"): secret(m.pg),
    }
    # Exactly the keys the example Secrets show (tls/'s pgcdc-secrets over the base's).
    shown = {}
    for path in (K8S / "secret.example.yaml", K8S_TLS / "secret.example.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            shown[doc["metadata"]["name"]] = set(doc["stringData"])
    assert {(name, key) for name, keys in shown.items() for key in keys} == set(values)
    secrets_root = m.base / "k8s-secrets"
    modes = k8s_tls_secret_modes()
    for (name, key), value in values.items():
        _write(secrets_root / name / key, value, modes[name])

    d.init_database(
        {"POSTGRES_DB": "app", "PGCDC_DB_PASSWORD": role_password, "PGCDC_HBA_HOSTSSL": "on"},
        pg_hba=IMAGE_PG_HBA,
    )
    check_role(d, version, hba="hostssl")

    setup, worker = k8s_tls_container("setup"), k8s_tls_container("pgcdc")
    setup_mounts = k8s_tls_mounts(setup, secrets_root)
    worker_mounts = k8s_tls_mounts(worker, secrets_root)
    config = k8s_tls_config()
    paths = [v for values_ in config.values() for v in values_.values() if str(v).startswith("/")]
    for container, mounts in ((setup, setup_mounts), (worker, worker_mounts)):
        env = [e.get("value", "") for e in container["env"]]
        for path in [*paths, *(v for v in env if v.startswith("/etc/pgcdc-"))]:
            if path.startswith("/etc/pgcdc-"):  # each file the container reads, mounted
                assert mapped(path, mounts) != path, (container["name"], path)
    m.kafka_listener = "sasl_bootstrap"
    m.config(
        config,
        "postgres.database.svc.cluster.local",
        "kafka.kafka.svc.cluster.local:9093",
        K8S_REGISTRY,
        mounts={**setup_mounts, **worker_mounts},
    )
    report = json.loads(d.run_once(setup["args"], k8s_env(setup, values), setup_mounts))
    assert report["slot_created"] and report["ddl_capture_installed"], report
    publishes_and_stops(d, worker["args"], k8s_env(worker, values), worker_mounts, tls=True)


# --- static: the override's servers, and the files make-demo-tls.sh writes ---------------


def test_compose_tls_override_keeps_the_base_and_turns_tls_on() -> None:
    """The override's postgres command starts the image's entrypoint with the base's
    settings plus ssl=on and the certificate, the key copied where the server accepts
    it; its Kafka listeners keep the base's internal ones and make pgcdc's and the
    host's SASL_SSL; every password variable of the base is emptied, a file
    naming it instead; and the override adds to the base without replacing a mount."""
    base = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]
    merged = compose_tls()["services"]
    script = merged["postgres"]["command"]
    assert script[:2] == ["bash", "-c"]
    words = shlex.split(script[2])
    entry = words.index("docker-entrypoint.sh")
    assert words[entry - 1] == "exec" and words[entry + 1] == "postgres"
    settings = words[entry + 2 :]
    assert settings[: len(base["postgres"]["command"]) - 1] == base["postgres"]["command"][1:]
    tls = dict(s.split("=", 1) for s in settings[len(base["postgres"]["command"]) - 1 :][1::2])
    assert tls["ssl"] == "on"
    key = tls["ssl_key_file"]
    assert f"-o postgres -g postgres -m 0600 /etc/pgcdc-tls/server.key {key}" in " ".join(words)
    assert tls["ssl_cert_file"] == "/etc/pgcdc-tls/server.crt"
    kafka = merged["kafka"]["environment"]
    protocols = dict(p.split(":") for p in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    advertised = dict(a.split("://") for a in kafka["KAFKA_ADVERTISED_LISTENERS"].split(","))
    pgcdc_env = merged["pgcdc"]["environment"]
    (listener,) = [
        n for n, a in advertised.items() if a == pgcdc_env["PGCDC_KAFKA__BOOTSTRAP_SERVERS"]
    ]
    assert protocols[listener] == "SASL_SSL" and protocols["HOST"] == "SASL_SSL"
    assert advertised["PLAINTEXT"] == "kafka:9092"  # the base's, for the broker itself
    for name in ("postgres", "pgcdc-setup", "pgcdc"):
        env = merged[name]["environment"]
        passwords = [var for var in base[name]["environment"] if var.endswith("PASSWORD")]
        assert passwords, name
        for var in passwords:  # emptied, the file replacing it
            assert env[var] == "" and env[f"{var}_FILE"].startswith("/run/secrets/"), var
    assert compose_service("pgcdc")["volumes"] == merged["pgcdc"]["volumes"][:-1]


def test_make_demo_tls_writes_every_file_the_override_names(tmp_path: Path) -> None:
    """make-demo-tls.sh, run into an empty directory, writes every user file the merged
    compose file mounts or declares as a secret; the servers' certificate verifies
    against its CA for each service name; Kafka's keystore opens with its password; the
    registry's users file sets what svc_tls's tls-registry sets, with the password of
    registry-basic-auth; the kafka image finds the keystore files and JAAS file its SSL
    and SASL setup wants; and a second run refuses to overwrite."""
    script = DEPLOY / "make-demo-tls.sh"
    run = subprocess.run([str(script), str(tmp_path)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    doc = compose_tls()
    for name in doc["services"]:
        for host in compose_mounts(name, tmp_path).values():
            assert host.exists(), (name, host)
    for declared in doc["secrets"].values():
        assert (tmp_path / declared["file"][2:]).is_file()
    cert = x509.load_pem_x509_certificate((tmp_path / "tls" / "server.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"postgres", "kafka", "registry", "localhost"} <= set(
        names.get_values_for_type(x509.DNSName)
    )
    openssl = shutil.which("openssl")
    assert openssl is not None
    for host in ("postgres", "kafka", "registry"):
        verify = subprocess.run(
            [openssl, "verify", "-CAfile", str(tmp_path / "tls" / "ca.crt"),
             "-verify_hostname", host, str(tmp_path / "tls" / "server.crt")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert verify.returncode == 0, verify.stdout + verify.stderr
    password = (tmp_path / "tls" / "kafka" / "keystore-password").read_text().strip()
    key, p12_cert, _ = pkcs12.load_key_and_certificates(
        (tmp_path / "tls" / "kafka" / "kafka.p12").read_bytes(), password.encode()
    )
    assert key is not None and p12_cert == cert
    props = dict(
        line.split("=", 1)
        for line in (tmp_path / "secrets" / "registry-auth.properties").read_text().splitlines()
    )
    user, _, registry_password = (
        (tmp_path / "secrets" / "registry-basic-auth").read_text().strip().partition(":")
    )
    assert props.pop(f"quarkus.security.users.embedded.users.{user}") == registry_password
    svc_tls = (DEPLOY / "local" / "svc_tls.py").read_text()
    for prop, value in props.items():
        assert f"{prop.replace(user, '{REGISTRY_USER}')}={value}" in svc_tls, prop
    env = doc["services"]["registry"]["environment"]
    assert env["QUARKUS_CONFIG_LOCATIONS"] in compose_mounts("registry", tmp_path)
    # The kafka image's configure script, for advertised SSL listeners: these files in
    # /etc/kafka/secrets, and KAFKA_OPTS set (here: the JAAS file, shipped).
    kafka_env, kafka_mounts = (
        doc["services"]["kafka"]["environment"],
        compose_mounts("kafka", tmp_path),
    )
    for var in (
        "KAFKA_SSL_KEYSTORE_FILENAME",
        "KAFKA_SSL_KEYSTORE_CREDENTIALS",
        "KAFKA_SSL_KEY_CREDENTIALS",
    ):
        assert (kafka_mounts["/etc/kafka/secrets"] / kafka_env[var]).is_file(), var
    jaas = kafka_env["KAFKA_OPTS"].removeprefix("-Djava.security.auth.login.config=")
    assert "ScramLoginModule required;" in kafka_mounts[jaas].read_text()
    again = subprocess.run(
        [str(script), str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert again.returncode == 1 and "exists" in again.stderr
