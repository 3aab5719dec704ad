"""`pgcdc`: change-data capture from PostgreSQL's WAL, decoded outside the server.

Every command reads its settings from `--config FILE` (YAML) and `PGCDC_*` environment
variables (see deploy/config.example.yaml); a bad setting stops the command with a
message naming the field. Errors pgcdc raises on purpose print as one line naming the
LSN, table or setting, and exit with a code that tells a supervisor what to do:

- 0: stopped cleanly (SIGTERM, or a command that finished);
- 1: fatal (`FatalError`): a permanent problem that retrying will not fix (wrong
  password, a certificate or TLS setting the server refuses (`TlsError`), a role or
  database that does not exist, wal_level not logical, a slot of
  the wrong type or held by another worker, a schema the registry rejects, WAL that
  is gone, corrupt WAL, fenced by a newer worker, a record larger than Kafka takes,
  offsets lost, kept in a topic pgcdc did not create, or no longer covered by
  the slot: `run --fresh-start` takes a new snapshot). Do not restart blindly: an
  operator must act;
- 2: configuration error (`ConfigError`, a subclass of the fatal ones);
- 3: retryable (`RetryableError`): a service stayed unreachable for its whole retry
  budget (source.retry_budget_s, kafka.retry_budget_s, registry.retry_budget_s;
  `service.backoff`: never sooner). Restart later, with backoff;
- 4: restartable (`RestartableError`): in-memory state was dropped on purpose; restart
  at once, the worker resumes from its committed offsets;
- 130: interrupted (Ctrl-C outside the worker).

`pgcdc` without a command prints its help on stderr and exits 2, as for any other
usage error.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from service.errors import ConfigError, PgcdcError, RestartableError, RetryableError
from service.lsn import parse_lsn

EPILOG = textwrap.dedent("""\
    first steps:
      pgcdc demo                       start local PostgreSQL, Kafka and a registry; show
                                       decoded transactions arriving in Kafka
      pgcdc setup --config c.yaml      check the source and install the physical slot and
                                       the DDL capture (event trigger)
      pgcdc peek --config c.yaml       print new transactions as test_decoding would
      pgcdc run --config c.yaml        the worker: publish every committed transaction
                                       to Kafka, exactly once

    settings: --config FILE (YAML) plus PGCDC_<SECTION>__<FIELD> environment variables,
    e.g. PGCDC_SOURCE__HOST=db PGCDC_SOURCE__PASSWORD=... (see deploy/config.example.yaml)
""")


def _lsn(text: str) -> int:
    try:
        return parse_lsn(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an LSN like 0/16B3748") from None


def _option(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    name, value = text.split("=", 1)
    return name, value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgcdc",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--config", type=Path, help="YAML settings file")
        return p

    p = command("setup", "check the source database and install the slot and DDL capture")
    p.add_argument(
        "--worker-role",
        metavar="ROLE",
        help="the role `pgcdc run` connects as: granted EXECUTE on pgcdc.toast_chunks, the "
        "reader of replaced TOAST values the unchanged-TOAST fill needs (README: Privileges)",
    )
    p = command("teardown", "remove the DDL capture (and the slot unless --keep-slot)")
    p.add_argument("--keep-slot", action="store_true")

    p = command("peek", "decode new transactions to stdout with the test_decoding text plugin")
    p.add_argument(
        "--timeout", type=float, default=10.0, help="stop after this many idle seconds (default 10)"
    )
    p.add_argument("--max-lines", type=int, default=0, help="stop after N lines (0: no limit)")
    p.add_argument(
        "-o",
        "--option",
        type=_option,
        action="append",
        default=[],
        help="plugin option NAME=VALUE (include-xids, skip-empty-xacts, ...)",
    )
    p.add_argument(
        "--show-internal",
        action="store_true",
        help="also print pgcdc's own logical messages (prefix __pgcdc.: the DDL capture's "
        "table definitions, snapshot watermarks and signals), hidden by default as the "
        "worker hides them",
    )

    p = command("replay", "decode WAL segment files from a directory (an archive or pg_wal)")
    p.add_argument("--dir", type=Path, required=True, help="directory of WAL segment files")
    p.add_argument("--start", type=_lsn, required=True, help="LSN to start reading at")
    p.add_argument(
        "--end",
        type=_lsn,
        help="stop at this LSN (default: end of the WAL; for a live pg_wal pass "
        "the server's pg_current_wal_lsn(), since later pages may be unwritten)",
    )
    p.add_argument(
        "-o", "--option", type=_option, action="append", default=[], help="plugin option NAME=VALUE"
    )

    p = command("waldump", "print WAL records pg_waldump-style (no database needed)")
    p.add_argument("--dir", type=Path, required=True, help="directory of WAL segment files")
    p.add_argument("--start", type=_lsn, required=True)
    p.add_argument("--end", type=_lsn)
    p.add_argument("--events", action="store_true", help="also print the decoded events")
    p.add_argument("--limit", type=int, default=0, help="stop after N records")

    command("status", "show the slot, positions, lag and the last committed offset")
    p = command("run", "run the worker: decode and publish to Kafka until SIGTERM")
    p.add_argument(
        "--fresh-start",
        action="store_true",
        help="start over with a new snapshot where the stored offsets are lost or no "
        "longer covered by the slot (snapshot.fresh_start); valid offsets are resumed",
    )
    p = command(
        "snapshot",
        "signal the running worker (through the WAL) to snapshot tables, or to pause, "
        "resume or stop its snapshot",
    )
    p.add_argument(
        "tables", nargs="*", metavar="TABLE", help="schema.table (default schema public)"
    )
    p.add_argument("--where", help="only rows matching this SQL condition")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--pause", action="store_true", help="pause the running snapshot")
    action.add_argument("--resume", action="store_true", help="resume a paused snapshot")
    action.add_argument("--stop", action="store_true", help="drop the tables not yet done")
    p.add_argument(
        "--queue",
        action="store_true",
        help="emit the signal although no worker streams from the slot now: it waits in "
        "the WAL and the next `pgcdc run` acts on it",
    )
    p = command("demo", "start local services, run a small workload, show it in Kafka")
    p.add_argument(
        "--keep-running",
        action="store_true",
        help="keep the worker and metrics endpoint up until Ctrl-C",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    from service.app import commands  # noqa: PLC0415  (keeps `pgcdc --help` instant)

    try:
        return int(getattr(commands, f"cmd_{args.command}")(args))
    except ConfigError as exc:
        print(f"pgcdc: configuration error: {exc}", file=sys.stderr)
        return 2
    except RetryableError as exc:
        print(f"pgcdc: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    except RestartableError as exc:
        print(f"pgcdc: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 4
    except PgcdcError as exc:
        print(f"pgcdc: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
