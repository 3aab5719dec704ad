#!/usr/bin/env python3
"""Install, start, check and stop the real services pgcdc is tested against.

    python deploy/local/services.py up [NAME...]      install what is missing, start, wait healthy
    python deploy/local/services.py down [NAME...]    stop cleanly
    python deploy/local/services.py status [NAME...]  say what runs where
    python deploy/local/services.py env [NAME...]     print the endpoints as JSON
    python deploy/local/services.py kill NAME...      SIGKILL now, as a crash would; print the pid
    python deploy/local/services.py list [--default]  print every known name (or the default set)
    python deploy/local/services.py promote NAME...   promote an ha-* standby, print its timeline
    python deploy/local/services.py rebuild NAME...   delete an ha-* pair and make it again

Services and their ports (all on 127.0.0.1):
    pg15 55415, pg16 55416, pg17 55417, pg18 55418 (one build with contrib per major),
    pg16v 55420 (pgvector build without contrib; see svc_pg), kafka 19092/19093,
    registry 18081: the default set, what `up` with no NAME starts and the suite uses;
    pg18v 55419 (pgvector 18 without contrib; pg18 has pgvector too), connect 18083
    (Kafka Connect with Debezium's PostgreSQL and JDBC connectors) and prometheus (a
    private instance from Debian's package, with promtool, on a port free at its first
    start; `env` says which; see svc_prometheus): only when named;
    fault-pg15 56415, fault-pg18 56418, fault-kafka 29092/29093 (+ 29094 advertised as
    29095, for a test proxy on 29095), fault-registry 28081: separate instances
    for fault-injection tests, which may kill -9 them at will; started only when named;
    tls-pg15 57415, tls-pg18 57418, tls-kafka 39092 (SSL, client certificate) / 39094
    (SASL_SSL) / 39093, tls-registry 38443 (HTTPS, basic auth): separate instances that
    accept TLS only, with a test CA and passwords under `<state>/tls` (svc_tls); started
    only when named.
    ha-pg15 58415 + ha-pg15s 58416, ha-pg18 58418 + ha-pg18s 58419: primary + streaming
    hot standby pairs (pg_basebackup, primary_conninfo, archive_command) for the
    failover tests, which promote and rebuild them (see svc_ha); started only when named.
`down`, `status` and `env` with no NAME mean every known service; `kill` needs names.

Each service keeps its state under the state directory (`$PGCDC_STATE_DIR`, default
`<repo>/.state`; PostgreSQL clusters under svc_pg's cluster root). `up` is idempotent: a
healthy service is left alone, and `up` after `kill` restarts from the data left behind.
Downloads (Debian packages, PostgreSQL wheels, Maven jars) are cached outside the
repository (apt, /var/cache/pgcdc, ~/.cache/pgcdc, ~/.m2) so a clean clone reuses them.

This file uses the standard library only: it runs before the project's venv exists.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from svc_common import Service, fixed_ports, reserve_ports, state_dir  # noqa: E402  (needs the sys.path entry above)

SERVICES = {
    "pg15": ("svc_pg", "Postgres15"),
    "pg16": ("svc_pg", "Postgres16"),
    "pg16v": ("svc_pg", "Postgres16Vector"),
    "pg17": ("svc_pg", "Postgres17"),
    "pg18": ("svc_pg", "Postgres18"),
    "pg18v": ("svc_pg", "Postgres18Vector"),
    "kafka": ("svc_kafka", "Kafka"),
    "registry": ("svc_registry", "Registry"),
    "fault-pg15": ("svc_pg", "FaultPostgres15"),
    "fault-pg18": ("svc_pg", "FaultPostgres18"),
    "fault-kafka": ("svc_kafka", "FaultKafka"),
    "fault-registry": ("svc_registry", "FaultRegistry"),
    "connect": ("svc_connect", "Connect"),
    "prometheus": ("svc_prometheus", "Prometheus"),
    "tls-pg15": ("svc_tls", "TlsPostgres15"),
    "tls-pg18": ("svc_tls", "TlsPostgres18"),
    "tls-kafka": ("svc_tls", "TlsKafka"),
    "tls-registry": ("svc_tls", "TlsRegistry"),
    "ha-pg15": ("svc_ha", "HaPrimary15"),
    "ha-pg15s": ("svc_ha", "HaStandby15"),
    "ha-pg18": ("svc_ha", "HaPrimary18"),
    "ha-pg18s": ("svc_ha", "HaStandby18"),
}
# What `up` starts when no name is given: everything the test suite connects to.
# pg18v is redundant with pg18 (which has pgvector too), and Kafka Connect (Debezium's
# connectors, ~1 GB) and Prometheus are started by the tests that need them (consumer
# tests, monitoring tests): only when named. The fault and TLS instances likewise.
ON_DEMAND = ("pg18v", "connect", "prometheus")
DEFAULT = [
    n for n in SERVICES if not n.startswith(("fault-", "tls-", "ha-")) and n not in ON_DEMAND
]
VERBS = {"up", "down", "status", "env", "kill", "list", "promote", "rebuild"}


def _service_class(module: str, cls: str) -> type[Service]:
    found = getattr(importlib.import_module(module), cls)
    assert isinstance(found, type) and issubclass(found, Service)
    return found


def service(name: str) -> Service:
    """Instantiate one service; its module is imported only when it is asked for."""
    svc = _service_class(*SERVICES[name])()
    assert isinstance(svc, Service)
    return svc


def _pair_verb(verb: str, names: list[str]) -> int:
    """promote / rebuild, which only the ha-* pairs (svc_ha) have."""
    for name in names:
        svc = service(name)
        action = getattr(svc, verb, None)
        if action is None or (verb == "promote" and not name.endswith("s")):
            print(f"services: {name} cannot {verb} (ha-* standbys only)", file=sys.stderr)
            return 2
        began = time.monotonic()
        result = action()
        print(f"{name}: {verb} done ({time.monotonic() - began:.1f}s)", file=sys.stderr)
        if verb == "promote":
            print(f"{name} {result}")
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in VERBS:
        print(__doc__, file=sys.stderr)
        return 2
    verb, names = argv[0], argv[1:]
    if verb == "list":
        print("\n".join(DEFAULT if names == ["--default"] else SERVICES))
        return 0
    unknown = [n for n in names if n not in SERVICES]
    if unknown:
        print(f"services: unknown service {unknown}; known: {list(SERVICES)}", file=sys.stderr)
        return 2
    if verb in ("kill", "promote", "rebuild") and not names:
        print(f"services: {verb} needs the names of the services", file=sys.stderr)
        return 2
    if verb in ("promote", "rebuild"):
        return _pair_verb(verb, names)
    chosen = [service(n) for n in (names or (DEFAULT if verb == "up" else list(SERVICES)))]
    if verb == "kill":
        for svc in chosen:
            began = time.monotonic()
            pid = svc.kill()
            took = time.monotonic() - began
            print(
                f"{svc.name}: killed pid {pid} ({took:.1f}s)"
                if pid is not None
                else f"{svc.name}: not running",
                file=sys.stderr,
            )
            print(f"{svc.name} {pid if pid is not None else '-'}")
        return 0
    if verb == "env":
        print(json.dumps({svc.name: svc.info() for svc in chosen}, indent=2))
        return 0
    if verb == "status":
        for svc in chosen:
            state = "healthy" if svc.healthy() else "down"
            print(f"{svc.name:14} {state:8} {json.dumps(svc.info())}")
        return 0
    if verb == "down":
        for svc in reversed(chosen):
            svc.stop()
            print(f"{svc.name}: stopped", file=sys.stderr)
        return 0
    # up
    state_dir().mkdir(parents=True, exist_ok=True)
    # Every known service's fixed ports, at each `up`: a fault or TLS instance started
    # later finds its ports never handed to a client socket meanwhile.
    note = reserve_ports(
        {p for module, cls in SERVICES.values() for p in fixed_ports(_service_class(module, cls))}
    )
    if note is not None:
        print(f"services: {note}", file=sys.stderr)
    started = time.monotonic()
    failed = []
    for svc in chosen:
        if svc.healthy():
            print(f"{svc.name}: already healthy", file=sys.stderr)
            continue
        began = time.monotonic()
        try:
            svc.install()
            installed = time.monotonic()
            svc.start()
            svc.wait_healthy()
        except Exception as exc:  # report every service, then fail as a whole
            print(f"{svc.name}: FAILED: {exc}", file=sys.stderr)
            log = svc.log_path()
            if log.exists():
                tail = log.read_text(errors="replace").splitlines()[-30:]
                print(f"--- last lines of {log}:", *tail, sep="\n", file=sys.stderr)
            failed.append(svc.name)
            continue
        done = time.monotonic()
        where = {k: v for k, v in svc.info().items() if k not in {"service", "features"}}
        if isinstance(where.get("dsn"), str):  # a TLS instance's holds its password
            where["dsn"] = re.sub(r"password=\S+", "password=********", str(where["dsn"]))
        print(
            f"{svc.name}: healthy (install {installed - began:.1f}s, "
            f"start {done - installed:.1f}s) at {where}",
            file=sys.stderr,
        )
    print(
        f"services: up took {time.monotonic() - started:.1f}s"
        + (f"; FAILED: {' '.join(failed)}" if failed else ""),
        file=sys.stderr,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
