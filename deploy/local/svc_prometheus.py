"""Prometheus (Debian's `prometheus` package, 2.42, with `promtool`), a private instance.

Contract:
- `install()` takes the binaries of Debian's `prometheus` package: `prometheus` and
  `promtool` from PATH when the package (or another install) provides both; otherwise
  `apt-get download prometheus` (after one `apt-get update` if the package lists do
  not have it) and `dpkg-deb -x` of that .deb into `CACHE/prometheus-deb`. The package
  is unpacked, not installed, on purpose: its maintainer scripts enable and start the
  system's own prometheus.service on :9090 wherever the init system lets them, and that
  service is never what pgcdc's tests use. Both binaries are Go programs linked only
  against libc. The unpacking goes to a temporary directory renamed into place, so a
  half-unpacked tree is never used; concurrent installs are serialised by a file lock.
- `start()` runs one instance of its own, `--web.listen-address` on 127.0.0.1 at a
  port free at its first start (or `PGCDC_PROMETHEUS_PORT`), kept in `<home>/port` so
  that later calls find it again (a new free one if another process took it since).
  Configuration (`<home>/prometheus.yml`, written at each start) and TSDB
  (`<home>/data`, 1 day of retention) live under the state directory. It scrapes every
  second, as job `pgcdc-local` (deliberately not `pgcdc`: the alert rules must not
  depend on a job name), the targets listed by the JSON files in `<home>/targets/`
  (Prometheus' file_sd format, re-read when they change: a test writes one naming its
  worker's metrics address, tests/fixtures/prometheus.py), and it evaluates
  deploy/prometheus/rules.yml every second. With `--web.enable-lifecycle`, POST
  /-/reload reloads the rules after an edit.
- `healthy()` is true when GET /-/ready answers 200. `stop()` SIGTERMs the instance,
  `kill()` SIGKILLs it; the next `up` starts it again on the same port and data.
- `info()` gives the URL, the port, the paths of both binaries, the targets directory
  and the version (`promtool --version`).

Standard library only: this runs before the project's venv exists.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import urllib.request
from pathlib import Path

from svc_common import (
    CACHE,
    REPO,
    Service,
    file_lock,
    kill_pid_file,
    pid_running,
    port_open,
    read_pid,
    run,
    sigkill_pid_file,
    spawn,
)

PACKAGE = "prometheus"
HOST = "127.0.0.1"
MARKER = "--web.listen-address=127.0.0.1:"  # in the command line of our instances only
JOB = "pgcdc-local"
RULES = REPO / "deploy" / "prometheus" / "rules.yml"
UNPACKED = CACHE / "prometheus-deb"

CONFIG = """\
# Written by deploy/local/svc_prometheus.py at each start; edits are lost.
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: {job}
    metrics_path: /metrics
    file_sd_configs:
      - files: ["{targets}/*.json"]
        refresh_interval: 1s
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _apt_download(package: str, into: Path) -> Path:
    """The .deb of `package` (the candidate version), fetched into `into` by apt-get."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        run(["apt-get", "download", "-qq", package], cwd=into, env=env)
    except RuntimeError:
        # A fresh machine has no package lists yet (or stale ones): update once, retry.
        run(["apt-get", "update", "-qq"], env=env)
        run(["apt-get", "download", "-qq", package], cwd=into, env=env)
    debs = sorted(into.glob(f"{package}_*.deb"))
    if not debs:
        raise RuntimeError(f"prometheus: apt-get download {package} left no .deb in {into}")
    return debs[-1]


class Prometheus(Service):
    """A private Prometheus on a loopback port (see the module docstring)."""

    name = "prometheus"
    start_timeout = 60.0

    # --- files -----------------------------------------------------------------------

    def pid_file(self) -> Path:
        return self.home() / "prometheus.pid"

    def port_file(self) -> Path:
        return self.home() / "port"

    def config_path(self) -> Path:
        return self.home() / "prometheus.yml"

    def targets_dir(self) -> Path:
        return self.home() / "targets"

    def binaries(self) -> tuple[Path, Path] | None:
        """(prometheus, promtool), or None when neither PATH nor the cache has both."""
        found = shutil.which("prometheus"), shutil.which("promtool")
        if found[0] is not None and found[1] is not None:
            return Path(found[0]), Path(found[1])
        server, tool = UNPACKED / "usr/bin/prometheus", UNPACKED / "usr/bin/promtool"
        return (server, tool) if server.is_file() and tool.is_file() else None

    def promtool(self) -> Path:
        found = self.binaries()
        if found is None:
            raise RuntimeError("prometheus: not installed; run install() first")
        return found[1]

    def port(self) -> int | None:
        try:
            return int(self.port_file().read_text().strip())
        except (OSError, ValueError):
            return None

    def url(self) -> str | None:
        port = self.port()
        return None if port is None else f"http://{HOST}:{port}"

    # --- Service -----------------------------------------------------------------------

    def install(self) -> None:
        if self.binaries() is not None:
            return
        CACHE.mkdir(parents=True, exist_ok=True)
        with file_lock(CACHE / ".prometheus-deb.lock"):
            if self.binaries() is not None:
                return
            partial = Path(tempfile.mkdtemp(prefix=".prometheus-", dir=CACHE))
            try:
                deb = _apt_download(PACKAGE, partial)
                tree = partial / "tree"
                run(["dpkg-deb", "-x", str(deb), str(tree)])
                tree.replace(UNPACKED)
            finally:
                shutil.rmtree(partial, ignore_errors=True)
        if self.binaries() is None:
            raise RuntimeError(f"prometheus: no usr/bin/prometheus and promtool in {UNPACKED}")

    def start(self) -> None:
        found = self.binaries()
        if found is None:
            raise RuntimeError("prometheus: not installed; run install() first")
        home = self.home()
        home.mkdir(parents=True, exist_ok=True)
        with file_lock(home / ".lock"):
            if pid_running(self.pid_file(), MARKER):
                return  # another `up` started it; wait_healthy() will wait for it
            port = int(os.environ.get("PGCDC_PROMETHEUS_PORT") or 0) or self.port()
            if port is None or port_open(port):  # first start, or taken since
                port = _free_port()
            self.port_file().write_text(f"{port}\n")
            self.targets_dir().mkdir(exist_ok=True)
            self.config_path().write_text(
                CONFIG.format(rules=RULES, job=JOB, targets=self.targets_dir())
            )
            cmd = [
                str(found[0]),
                f"--config.file={self.config_path()}",
                f"--storage.tsdb.path={home / 'data'}",
                "--storage.tsdb.retention.time=1d",
                f"{MARKER}{port}",
                "--web.enable-lifecycle",
            ]
            spawn(cmd, self.log_path(), self.pid_file(), cwd=home)

    def healthy(self) -> bool:
        url = self.url()
        if url is None or not pid_running(self.pid_file(), MARKER):
            return False
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2.0) as resp:
                return int(resp.status) == 200
        except OSError:  # URLError and HTTPError are OSErrors
            return False

    def stop(self) -> None:
        kill_pid_file(self.pid_file(), timeout=30.0)

    def kill(self) -> int | None:
        return sigkill_pid_file(self.pid_file())

    def info(self) -> dict[str, object]:
        found = self.binaries()
        version = None
        if found is not None:
            version = run([str(found[1]), "--version"]).stdout.split("\n", 1)[0]
        return {
            "service": self.name,
            "url": self.url(),
            "port": self.port(),
            "prometheus": None if found is None else str(found[0]),
            "promtool": None if found is None else str(found[1]),
            "targets_dir": str(self.targets_dir()),
            "job": JOB,
            "rules": str(RULES),
            "version": version,
            "log": str(self.log_path()),
            "pid": read_pid(self.pid_file()),
        }
