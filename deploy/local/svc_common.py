"""Shared pieces of the local services script: the Service interface and small helpers.

Standard library only. A Service knows how to install itself when missing, start in the
background with its output in `log_path()`, tell whether it is healthy, and stop.
"""

from __future__ import annotations

import abc
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("PGCDC_CACHE_DIR", Path.home() / ".cache" / "pgcdc"))


def state_dir() -> Path:
    """Where services keep data, logs and pid files (git-ignored)."""
    return Path(os.environ.get("PGCDC_STATE_DIR", REPO / ".state")).resolve()


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


RESERVED_PORTS = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")


def fixed_ports(cls: type) -> set[int]:
    """The fixed TCP ports of a service class: its int class attributes named `port` or
    `*_port` (0: chosen at start, as Prometheus's)."""
    found = set()
    for name in dir(cls):
        if name == "port" or name.endswith("_port"):
            value = getattr(cls, name)
            if isinstance(value, int) and value > 0:
                found.add(value)
    return found


def _port_ranges(text: str) -> set[int]:
    ports: set[int] = set()
    for part in text.replace("\n", ",").split(","):
        low, _, high = part.strip().partition("-")
        if low:
            ports.update(range(int(low), int(high or low) + 1))
    return ports


def reserve_ports(ports: set[int]) -> str | None:
    """Add `ports` to the kernel's ip_local_reserved_ports, so that no outgoing
    connection is given one of them as its local port: most service ports lie in the
    ephemeral range (32768-60999 by default), and a client socket that happened to hold
    one made a restart fail with "Address already in use" (tls-kafka's 39092 in CI).
    None when they are reserved; else why not (not root, a read-only /proc)."""
    try:
        held = _port_ranges(RESERVED_PORTS.read_text())
        if ports <= held:
            return None
        RESERVED_PORTS.write_text(",".join(str(p) for p in sorted(held | ports)))
    except OSError as exc:
        return f"could not reserve the service ports ({exc})"
    return None


def wait_ports_free(name: str, ports: set[int], timeout: float = 60.0) -> None:
    """Wait until each of `ports` can be bound on 127.0.0.1 (with SO_REUSEADDR, as the
    servers bind): a stopped instance's sockets, or a client connection that holds the
    port as its local one, may outlive a stop for a moment. RuntimeError naming the
    port after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    for port in sorted(ports):
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(("127.0.0.1", port))
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"{name}: 127.0.0.1:{port} still in use after {timeout:.0f}s ({exc})"
                        ) from exc
            time.sleep(0.5)


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command, raising with its output when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        out, err = proc.stdout[-2000:], proc.stderr[-2000:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{out}\n{err}")
    return proc  # type: ignore[no-any-return]


def apt_install(*packages: str) -> None:
    """Install Debian packages (we run as root here, as CI does)."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run(["apt-get", "update", "-qq"], env=env)
    run(["apt-get", "install", "-y", "-qq", *packages], env=env)


def java_bin() -> str:
    java = shutil.which("java")
    if java is None:
        apt_install("openjdk-17-jre-headless")
        java = shutil.which("java")
    if java is None:
        raise RuntimeError("no java on PATH even after installing openjdk-17-jre-headless")
    return java


def spawn(
    cmd: list[str],
    log: Path,
    pid_file: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start a long-running process detached from this one; remember its pid."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    pid_file.write_text(str(proc.pid))
    return proc.pid


def kill_pid_file(pid_file: Path, timeout: float = 30.0) -> None:
    """SIGTERM the process group in pid_file, then SIGKILL after timeout."""
    if not pid_file.exists():
        return
    try:
        pid = int(pid_file.read_text().strip())
    except ValueError:
        pid_file.unlink()
        return
    for sig, wait in ((15, timeout), (9, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            # Reap it if it is our own child; normally it is not (start_new_session).
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.2)
        else:
            continue
        break
    pid_file.unlink(missing_ok=True)


def read_pid(pid_file: Path) -> int | None:
    """The pid in pid_file when it names a live (not zombie) process, else None."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if alive(pid) else None


def alive(pid: int) -> bool:
    """True while pid exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state letter follows the parenthesised command name, which may hold spaces.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid: int, timeout: float = 15.0) -> None:
    """Wait until pid has exited and, if it can be within timeout, been reaped.

    A killed service's parent is init (it was started in a session of its own by a
    `services.py` process that has exited), and init reaps it a moment later. Until then
    the zombie still answers kill(pid, 0), which is how the postmaster's lock-file check
    decides that another postmaster is running, so a restart waits for the reaping too.
    """
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if time.monotonic() > deadline:
            if alive(pid):
                raise RuntimeError(f"pid {pid} still alive {timeout:.0f}s after SIGKILL")
            return  # a zombie nobody reaps: dead all the same
        time.sleep(0.05)


def sigkill_pid_file(pid_file: Path) -> int | None:
    """SIGKILL the process group in pid_file at once (a crash, for fault tests); return
    the pid killed, or None when nothing ran. The pid file is removed."""
    pid = read_pid(pid_file)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        wait_gone(pid)
    pid_file.unlink(missing_ok=True)
    return pid


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if missing) for the block's duration,
    so two `up` calls at once start one process."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pid_running(pid_file: Path, marker: str) -> bool:
    """True when pid_file names a live process whose command line contains `marker`."""
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    return marker.encode() in cmdline


class Service(abc.ABC):
    """One service. Subclasses set `name` and implement the six abstract methods."""

    name = "?"
    start_timeout = 120.0

    @abc.abstractmethod
    def install(self) -> None:
        """Install whatever is missing. Cheap when everything is present."""

    @abc.abstractmethod
    def start(self) -> None:
        """Start in the background; return without waiting for health."""

    @abc.abstractmethod
    def healthy(self) -> bool:
        """True when the service answers on its port the way clients need."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop cleanly; a no-op when not running."""

    @abc.abstractmethod
    def info(self) -> dict[str, object]:
        """Endpoints and versions, for tests and for `env`."""

    @abc.abstractmethod
    def kill(self) -> int | None:
        """SIGKILL the service's whole process group now, as a crash would, and wait until
        it is gone; return the pid killed, or None when it was not running. The next `up`
        starts it again from the data it left."""

    def listen_ports(self) -> set[int]:
        """The fixed ports this service binds itself (a start waits until they are
        free); a port a test binds beside it (FaultKafka's proxy) is left out."""
        return fixed_ports(type(self))

    def home(self) -> Path:
        return state_dir() / self.name

    def log_path(self) -> Path:
        return self.home() / "service.log"

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.healthy():
                return
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} not healthy after {self.start_timeout:.0f}s")
