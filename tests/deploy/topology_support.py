"""Run the shipped topology as its engine would, on the host, against the shared services.

No container engine runs here, so this runs what the engine would run, read from the
files that ship: the PostgreSQL image's init scripts (deploy/postgres/init, with the
environment deploy/docker-compose.yml gives the postgres service), then the setup and
worker containers' commands and environments (compose's `pgcdc-setup` and `pgcdc`
services, or deploy/k8s's Deployment: the `setup` init container and the `pgcdc`
container, their Secrets' values from secret.example.yaml, their config from the
ConfigMap), each with the image's ENV, ENTRYPOINT and CMD from the Dockerfile.

The image, emulated (`ImageTree`): the Dockerfile's final stage holds nothing of the
checkout but the wheel maturin builds, so the commands run from a directory holding no
more than that wheel does by pyproject's [tool.maturin]: the modules of its
python-packages, the files its include globs add (minus its exclude globs) and the
native extension `module-name` names, already built (no cargo here). PYTHONPATH is that
directory alone and the working directory is the image's WORKDIR, mapped, so a file the
wheel lacks (the Avro schemas used to be one) fails here as it would in the image. The
ENTRYPOINT `pgcdc` is the console script of [project.scripts], called as pip's launcher
calls it, with the venv's interpreter.

What the engine would resolve, mapped to the host (`Mapping`), and nothing else:

- `postgres:5432` (compose), `postgres.database.svc.cluster.local:5432` (k8s): the
  services script's pg15 or pg18;
- `kafka:9092`, `kafka.kafka.svc.cluster.local:9092`: the shared Kafka;
- `http://registry:8080/...`, `http://apicurio-registry.registry.svc...:8080/...`: the
  shared Apicurio, same path;
- database `app`, role `pgcdc`, slot `pgcdc`, topic prefix `pgcdc`: one unique name
  (the servers and the broker are shared);
- metrics port 9187: 0, any free port, read from the worker's `metrics_serving` log line;
- /etc/pgcdc/config.yaml (compose's volume, the ConfigMap), /var/lib/pgcdc (the state
  volume, the image's WORKDIR and HOME) and /tmp (k8s's emptyDir): files and
  directories under the test's own directory;
- the init script's `$PGDATA`: a directory holding a copy of the server's pg_hba.conf,
  so the shared server's own is never changed (the test checks the line appended);
- `${VAR:-default}` in compose: its default, as with no .env file.

The shared servers trust loopback connections, so the passwords (a SCRAM one for the
role, set by the init script) are sent and not checked. Everything created is dropped
by `Deployment.drop`: the worker killed if still running, the slot, the database, the
role (server-wide, hence unique).

The TLS variants (tests/deploy/test_topology_tls.py) run the same against the TLS-only
instances of deploy/local/svc_tls.py, which check every password:

- compose: docker-compose.yml with docker-compose.tls.yml over it, merged as compose
  merges files (overlay_support.py's `compose_merge`: the rules those files use); the
  containers' files (`mounts`: a service's bind mounts and compose secrets, at
  /run/secrets/<target>) are the test's, made as make-demo-tls.sh would lay them out
  but holding the TLS instances' CA and passwords; `endpoints` maps the engine's
  `kafka:9094` and `https://registry:8443/...` in the environment to the TLS instances;
- k8s: deploy/k8s/tls built as kustomize builds it (overlay_support.py's `kustomize`:
  its resources, then its patches by strategic merge: the rules those patches use),
  each Secret a directory holding one file per key, as the kubelet projects it;
- the init script's `$PGDATA/pg_hba.conf` is then `IMAGE_PG_HBA`, what the postgres
  image leaves there, so that its hostssl rewrite has lines to rewrite;
- every connection of the test's own (SQL, the init script's psql, the readers) uses
  TLS with the instance's CA and password.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extensions
import yaml

from service.config import Settings, load_settings
from tests.integration.pipeline_kafka_support import Rec, WorkerProcess, read_all, unique

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
K8S = DEPLOY / "k8s"
DOCKERFILE = ROOT / "Dockerfile"
INIT_DIR = DEPLOY / "postgres" / "init"
CONFIG_PATH = "/etc/pgcdc/config.yaml"  # where compose and k8s mount the config
STATE_ROOT = "/var/lib/pgcdc"  # the image's WORKDIR and home, the state volume
POSTGRES_IMAGE_USER = "postgres"  # the postgres image's POSTGRES_USER default
# What the postgres image leaves in pg_hba.conf before its init scripts run: initdb's
# (trust for the socket and loopback, which the image's initdb is not told otherwise) and
# the line its entrypoint appends for every other address (POSTGRES_HOST_AUTH_METHOD's
# default with a password, scram-sha-256).
IMAGE_PG_HBA = """\
local   all             all                                     trust
host    all             all             127.0.0.1/32            trust
host    all             all             ::1/128                 trust
local   replication     all                                     trust
host    replication     all             127.0.0.1/32            trust
host    replication     all             ::1/128                 trust

host all all all scram-sha-256
"""

# --- the files ---------------------------------------------------------------------------


def pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        doc: dict[str, Any] = tomllib.load(handle)
    return doc


def dockerfile_final_stage() -> list[str]:
    """The Dockerfile's last stage, one instruction a line (continuations joined)."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    starts = [i for i, ln in enumerate(lines) if ln.startswith("FROM ")]
    return lines[starts[-1] :]


def image_env() -> dict[str, str]:
    """The final stage's ENV, as `docker inspect` would list it."""
    env: dict[str, str] = {}
    for line in dockerfile_final_stage():
        if line.startswith("ENV "):
            for pair in re.findall(r"(\w+)=(\S+)", line[4:]):
                env[pair[0]] = pair[1]
    return env


def image_json(instruction: str) -> list[str]:
    """The exec form of the final stage's ENTRYPOINT or CMD."""
    for line in dockerfile_final_stage():
        if line.startswith(instruction + " "):
            value: list[str] = json.loads(line[len(instruction) + 1 :])
            return value
    raise AssertionError(f"no {instruction} in the Dockerfile's final stage")


def resolve_compose(value: str) -> str:
    """`${VAR:-default}` as compose resolves it with VAR unset (no .env file)."""

    def default(match: re.Match[str]) -> str:
        if match[2] is None:
            raise AssertionError(f"{match[0]} has no default: the topology needs a .env")
        return match[2]

    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", default, value)


def compose_service(name: str) -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    return dict(services[name])


def compose_env(name: str) -> dict[str, str]:
    env = compose_service(name).get("environment", {})
    return {k: resolve_compose(str(v)) for k, v in env.items()}


def k8s_docs(filename: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((K8S / filename).read_text()) if d]


def k8s_secret_values() -> dict[tuple[str, str], str]:
    """(Secret name, key) -> value, from secret.example.yaml (what `kubectl create secret`
    would have stored)."""
    return {
        (d["metadata"]["name"], key): str(value)
        for d in k8s_docs("secret.example.yaml")
        for key, value in d["stringData"].items()
    }


def k8s_container(name: str) -> dict[str, Any]:
    """A container (or init container) of the Deployment."""
    (deployment,) = [d for d in k8s_docs("deployment.yaml") if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        if container["name"] == name:
            return dict(container)
    raise AssertionError(f"no container {name} in deployment.yaml")


def k8s_env(
    container: dict[str, Any], secrets: dict[tuple[str, str], str] | None = None
) -> dict[str, str]:
    """The container's environment as the kubelet sets it: values, and secretKeyRefs
    from the Secrets (`secrets`, by default secret.example.yaml's; an optional key that
    is present is set, even when empty)."""
    secrets = k8s_secret_values() if secrets is None else secrets
    env = {}
    for entry in container["env"]:
        if "value" in entry:
            env[entry["name"]] = str(entry["value"])
            continue
        ref = entry["valueFrom"]["secretKeyRef"]
        key = (ref["name"], ref["key"])
        if key in secrets:
            env[entry["name"]] = secrets[key]
        elif not ref.get("optional", False):
            raise AssertionError(f"{entry['name']}: secret {key} missing from the example")
    return env


def k8s_config() -> dict[str, Any]:
    (configmap,) = k8s_docs("configmap.yaml")
    doc: dict[str, Any] = yaml.safe_load(configmap["data"]["config.yaml"])
    return doc


def mapped(value: str, mounts: dict[str, Path]) -> str:
    """`value`, a container path under one of `mounts`, as the host's path; else as is."""
    for target in sorted(mounts, key=len, reverse=True):
        if value == target or value.startswith(target.rstrip("/") + "/"):
            return str(mounts[target]) + value[len(target) :]
    return value


# --- the image ---------------------------------------------------------------------------


@dataclass
class ImageTree:
    """The packages as the wheel would install them, in `root` (module docstring)."""

    root: Path
    files: list[Path] = field(default_factory=list)  # relative to root

    @classmethod
    def build(cls, root: Path) -> ImageTree:
        maturin = pyproject()["tool"]["maturin"]
        assert maturin["python-source"] == "."
        wheel_globs = [e["path"] for e in maturin.get("include", []) if e["format"] == "wheel"]
        excluded = [e["path"] for e in maturin.get("exclude", []) if e["format"] == "wheel"]
        chosen: set[Path] = set()
        for package in maturin["python-packages"]:
            chosen.update(p for p in (ROOT / package).rglob("*.py"))
        for pattern in wheel_globs:
            chosen.update(ROOT.glob(pattern))
        package_dir, _, module = maturin["module-name"].rpartition(".")
        chosen.update((ROOT / package_dir.replace(".", "/")).glob(f"{module}.*.so"))
        for pattern in excluded:
            chosen.difference_update(ROOT.glob(pattern))
        tree = cls(root)
        for path in sorted(p for p in chosen if p.is_file() and "__pycache__" not in p.parts):
            rel = path.relative_to(ROOT)
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, root / rel)
            tree.files.append(rel)
        return tree

    def console_script(self, name: str) -> list[str]:
        """The argv prefix pip's launcher for [project.scripts] `name` amounts to."""
        module, _, attr = pyproject()["project"]["scripts"][name].partition(":")
        return [
            sys.executable,
            "-c",
            f"import sys; from {module} import {attr}; sys.exit({attr}())",
        ]


# --- the mapping -------------------------------------------------------------------------


@dataclass
class Mapping:
    """The engine's names and paths, resolved on this host (module docstring)."""

    pg: dict[str, Any]
    kafka: dict[str, Any]
    registry: dict[str, Any]
    base: Path  # the test's directory
    name: str = field(default_factory=lambda: unique("topo"))
    # TLS variants: the engine's endpoints named in the environment -> the instances'
    # (exact values), the listener the config's Kafka endpoint maps to, and the readers'
    # security settings (`settings`).
    endpoints: dict[str, str] = field(default_factory=dict)
    kafka_listener: str = "bootstrap"
    reader: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.db = self.role = self.slot = self.prefix = self.name
        self.config_file = self.base / "etc-pgcdc" / "config.yaml"
        self.state_root = self.base / "var-lib-pgcdc"
        self.tmp = self.base / "tmp"
        self.pgdata = self.base / "pgdata"
        for d in (self.config_file.parent, self.state_root, self.tmp, self.pgdata):
            d.mkdir(parents=True, exist_ok=True)

    def path(self, text: str) -> str:
        """Container paths inside `text` (an argument or an env value), mapped."""
        text = text.replace(CONFIG_PATH, str(self.config_file))
        text = text.replace(STATE_ROOT, str(self.state_root))
        return text

    def config(
        self,
        shipped: dict[str, Any],
        host: str,
        kafka: str,
        registry: str,
        mounts: dict[str, Path] | None = None,
    ) -> Path:
        """The shipped config with the engine's endpoints and the shared names mapped;
        `host`, `kafka`, `registry`: the endpoints it is expected to name; the paths it
        names under `mounts` mapped to theirs."""
        doc = json.loads(json.dumps(shipped))
        for values in doc.values():
            for key, value in values.items():
                if isinstance(value, str):
                    values[key] = mapped(value, mounts or {})
        source = doc["source"]
        assert (source["host"], source["port"]) == (host, 5432)
        assert (source["dbname"], source["user"], source["slot"]) == ("app", "pgcdc", "pgcdc")
        source.update(host=self.pg["host"], port=self.pg["port"], dbname=self.db)
        source.update(user=self.role, slot=self.slot)
        assert doc["kafka"]["bootstrap_servers"] == kafka
        assert doc["kafka"]["topic_prefix"] == "pgcdc"
        doc["kafka"].update(
            bootstrap_servers=self.kafka[self.kafka_listener], topic_prefix=self.prefix
        )
        path = registry.split("/", 3)[3]
        assert self.registry["url"].endswith("/" + path), (registry, self.registry["url"])
        doc["registry"]["url"] = self.registry["url"]
        assert doc["metrics"]["port"] == 9187
        doc["metrics"]["port"] = 0
        doc["decoding"]["state_dir"] = self.path(doc["decoding"]["state_dir"])
        self.config_file.write_text(yaml.safe_dump(doc))
        return self.config_file

    def settings(self) -> Settings:
        """What a consumer needs to read the topics back."""
        kafka = {"bootstrap_servers": self.kafka["bootstrap"], **self.reader.get("kafka", {})}
        return load_settings(
            kafka={**kafka, "topic_prefix": self.prefix},
            registry={"url": self.registry["url"], **self.reader.get("registry", {})},
        )

    def admin_dsn(self, dbname: str | None = None) -> str:
        """The instance's superuser DSN (for a TLS one: its password, verify-full)."""
        return psycopg2.extensions.make_dsn(self.pg["dsn"], dbname=dbname or self.db)


# --- running it ---------------------------------------------------------------------------


@dataclass
class Deployment:
    """One run of the topology: the database the init scripts made, and the containers."""

    mapping: Mapping
    image: ImageTree
    workers: list[WorkerProcess] = field(default_factory=list)

    def sql(self, statement: str, params: Sequence[Any] = (), dbname: str | None = None) -> Any:
        conn = psycopg2.connect(self.mapping.admin_dsn(dbname))
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(statement, params)
                return cur.fetchall() if cur.description else None
        finally:
            conn.close()

    def init_database(
        self,
        postgres_env: dict[str, str],
        mounts: dict[str, Path] | None = None,
        pg_hba: str | None = None,
    ) -> None:
        """What the postgres image's entrypoint does on an empty data directory: create
        POSTGRES_DB, then run every script of docker-entrypoint-initdb.d in name order
        with the container's environment (the role's and database's names mapped, and
        the paths under `mounts`). $PGDATA/pg_hba.conf: `pg_hba`, else a copy of the
        server's. psql connects to the instance as its superuser (for a TLS instance:
        verify-full, with its password)."""
        m = self.mapping
        assert postgres_env["POSTGRES_DB"] == "app"
        assert postgres_env.get("PGCDC_DB_USER", "pgcdc") == "pgcdc"
        self.sql(f"CREATE DATABASE {m.db}", dbname="postgres")
        if pg_hba is None:
            shutil.copy(Path(m.pg["pgdata"]) / "pg_hba.conf", m.pgdata / "pg_hba.conf")
        else:
            (m.pgdata / "pg_hba.conf").write_text(pg_hba)
        libpq = {}
        if "password_file" in m.pg:
            libpq = {
                "PGSSLMODE": "verify-full",
                "PGSSLROOTCERT": str(m.pg["ca"]),
                "PGPASSWORD": Path(m.pg["password_file"]).read_text().strip(),
            }
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("PG", "POSTGRES"))},
            **{k: mapped(v, mounts or {}) for k, v in postgres_env.items()},
            **libpq,
            "POSTGRES_USER": postgres_env.get("POSTGRES_USER", POSTGRES_IMAGE_USER),
            "POSTGRES_DB": m.db,
            "PGCDC_DB_USER": m.role,
            "PGDATA": str(m.pgdata),
            "PGHOST": str(m.pg["host"]),
            "PGPORT": str(m.pg["port"]),
        }
        for script in sorted(INIT_DIR.iterdir()):
            assert script.suffix == ".sh" and os.access(script, os.X_OK), script
            proc = subprocess.run(
                [str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
            )
            assert proc.returncode == 0, f"{script.name}:\n{proc.stdout}\n{proc.stderr}"

    def env(
        self, container_env: dict[str, str], mounts: dict[str, Path] | None = None
    ) -> dict[str, str]:
        """The container's process environment: the image's ENV, then the service's,
        paths (and `mounts`) and endpoints mapped, and PYTHONPATH the image tree alone."""
        m = self.mapping
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PGCDC_", "PYTHON", "PG")) and k != "TMPDIR"
        }
        env = {**base, **image_env(), **container_env}
        env = {k: mapped(m.path(m.endpoints.get(v, v)), mounts or {}) for k, v in env.items()}
        env.update(PYTHONPATH=str(self.image.root), HOME=str(m.state_root), TMPDIR=str(m.tmp))
        return env

    def run_once(
        self,
        args: Sequence[str],
        container_env: dict[str, str],
        mounts: dict[str, Path] | None = None,
    ) -> str:
        """A one-shot container (setup): its stdout; it must exit 0. The worker's role
        that `--worker-role` names (the shipped "pgcdc") is mapped to this run's."""
        args = list(args)
        if "--worker-role" in args:
            at = args.index("--worker-role") + 1
            assert args[at] == "pgcdc", args
            args[at] = self.mapping.role
        argv = [*self.image.console_script(image_json("ENTRYPOINT")[0]), *args]
        proc = subprocess.run(
            [self.mapping.path(a) for a in argv],
            env=self.env(container_env, mounts),
            cwd=self.mapping.state_root,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
        return proc.stdout

    def start(
        self,
        args: Sequence[str],
        container_env: dict[str, str],
        mounts: dict[str, Path] | None = None,
    ) -> WorkerProcess:
        """A long-running container (the worker); its stdout and stderr go to a log."""
        argv = [*self.image.console_script(image_json("ENTRYPOINT")[0]), *args]
        log_path = self.mapping.base / f"worker-{len(self.workers)}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [self.mapping.path(a) for a in argv],
                env=self.env(container_env, mounts),
                cwd=self.mapping.state_root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        worker = WorkerProcess(proc, log_path)
        self.workers.append(worker)
        return worker

    def healthz(self, worker: WorkerProcess) -> int:
        """The image's HEALTHCHECK, against the port the worker logged."""
        port = int(worker.wait_event(["metrics_serving"], 30)["port"])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            return int(resp.status)

    def read_topic(self, table: str, count: int, timeout: float = 60.0) -> list[Rec]:
        """The committed records of `public.<table>`'s topic (read_committed, Avro), once
        there are at least `count`."""
        topic = f"{self.mapping.prefix}.public.{table}"
        deadline = time.monotonic() + timeout
        while True:
            records = read_all(self.mapping.settings(), [topic], missing_ok=True)
            if len(records) >= count or time.monotonic() > deadline:
                return records
            time.sleep(0.5)

    def drop(self) -> None:
        """Kill what still runs; drop the slot, the database and the role."""
        m = self.mapping
        for worker in self.workers:
            worker.kill()
        for _ in range(50):  # a killed worker's walsender may take a moment to go
            rows = self.sql(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                (m.slot,),
                dbname="postgres",
            )
            if not rows:
                break
            if not rows[0][0]:
                self.sql("SELECT pg_drop_replication_slot(%s)", (m.slot,), dbname="postgres")
                break
            time.sleep(0.2)
        self.sql(f"DROP DATABASE IF EXISTS {m.db} WITH (FORCE)", dbname="postgres")
        self.sql(f"DROP ROLE IF EXISTS {m.role}", dbname="postgres")


# --- what every topology test checks -----------------------------------------------------

INSERTED = ("Grace Hopper", "Barbara Liskov", "Frances Allen")


def check_role(d: Deployment, version: int, hba: str = "host") -> None:
    """The init script's role has the worker's privileges of `version` and no more,
    a SCRAM password, and its replication line in pg_hba.conf (`hba`: host, hostssl)."""
    m = d.mapping
    ((sup, repl, login, createdb, createrole, bypassrls, scram),) = d.sql(
        "SELECT rolsuper, rolreplication, rolcanlogin, rolcreatedb, rolcreaterole,"
        " rolbypassrls, rolpassword LIKE 'SCRAM-SHA-256$%%' FROM pg_authid WHERE rolname = %s",
        (m.role,),
    )
    assert (sup, repl, login, createdb, createrole, bypassrls) == (
        False,
        True,
        True,
        False,
        False,
        False,
    )
    assert scram
    member_of = {
        r[0]
        for r in d.sql(
            "SELECT g.rolname FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid"
            " JOIN pg_roles u ON u.oid = a.member WHERE u.rolname = %s",
            (m.role,),
        )
    }
    assert member_of == (
        {"pg_read_all_data", "pg_checkpoint"} if version == 15 else {"pg_read_all_data"}
    )
    ((create_db, log_snapshot),) = d.sql(
        "SELECT has_database_privilege(%s, current_database(), 'CREATE'),"
        " (SELECT has_function_privilege(%s, p.oid, 'EXECUTE') FROM pg_proc p"
        "  WHERE p.proname = 'pg_log_standby_snapshot')",
        (m.role, m.role),
    )
    assert not create_db
    assert log_snapshot is (None if version == 15 else True)
    lines = (m.pgdata / "pg_hba.conf").read_text().splitlines()
    assert lines[-1] == f"{hba} replication {m.role} all scram-sha-256"


def publishes_and_stops(
    d: Deployment,
    worker_args: list[str],
    worker_env: dict[str, str],
    mounts: dict[str, Path] | None = None,
    tls: bool = False,
) -> None:
    """Start the worker, see the init script's rows and later inserts in Kafka, check
    the healthcheck and that the slot is held by the worker's role, SIGTERM: exit 0.
    With `tls`: every connection of the worker's role, the walsender's and the SQL
    ones, is encrypted (pg_stat_ssl), while it runs and publishes."""
    m = d.mapping
    worker = d.start(worker_args, worker_env, mounts)
    worker.wait_ready(90)
    assert d.healthz(worker) == 200
    ((holder,),) = d.sql(
        "SELECT a.usename FROM pg_replication_slots s"
        " JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = %s",
        (m.slot,),
    )
    assert holder == m.role
    for name in INSERTED:
        d.sql("INSERT INTO public.customers (name) VALUES (%s)", (name,))
    records = d.read_topic("customers", 5)
    ops = [(r.value["op"], r.value["after"]["name"]) for r in records]
    assert ops == [
        ("r", "Ada Lovelace"),
        ("r", "Edgar Codd"),
        *(("c", name) for name in INSERTED),
    ], worker.tail()
    if tls:
        connections = d.sql(
            "SELECT a.backend_type, s.ssl FROM pg_stat_activity a"
            " JOIN pg_stat_ssl s ON s.pid = a.pid WHERE a.usename = %s",
            (m.role,),
        )
        assert {kind for kind, _ in connections} >= {"walsender", "client backend"}, connections
        assert all(ssl for _, ssl in connections), connections
    assert worker.terminate(60) == 0, worker.tail()
    assert "Traceback" not in worker.log_text()
