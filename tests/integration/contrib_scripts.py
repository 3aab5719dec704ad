"""contrib/test_decoding's regression scripts as workloads of the differential harness.

`load(name)` reads `data/test_decoding/<name>.sql` (PostgreSQL's script, adapted as
its header says) and returns a `Script`: what `decoding_support.compare` needs to run
it, the slot being the harness's own instead of the script's `regression_slot`:
- the statements before `pg_create_logical_replication_slot` are the setup (run
  before the slot, so neither decoder sees them); the slot's fourth argument is
  `two_phase`;
- every `pg_logical_slot_get_changes` becomes a DRAIN step, so test_decoding decodes
  at the points the script's expected output was made; its option pairs (the first
  call's) are the options both decoders get, with test_decoding's default
  `skip-empty-xacts` 0 unless given;
- `pg_logical_slot_peek_changes` is left out (it consumes nothing), and so is
  everything from `pg_drop_replication_slot` on (cleanup nobody decodes);
- any other statement runs as it is, in order, on one connection (a transaction block
  spans several statements, as in psql).

Statements are split at top-level semicolons: quotes, dollar quotes and comments are
respected. psql meta-commands (a line starting with a backslash) are a ValueError: a
script that needs them is not run through this loader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.decoding_support import DRAIN, Step

DATA = Path(__file__).parent / "data" / "test_decoding"

_DOLLAR = re.compile(r"\$[A-Za-z_][A-Za-z_0-9]*\$|\$\$")
_OPTION_PAIR = re.compile(r"'([^']*)'\s*,\s*'([^']*)'")


@dataclass
class Script:
    name: str
    setup: list[str] = field(default_factory=list)
    workload: list[Step] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    two_phase: bool = False


def split_statements(sql: str) -> list[str]:
    """Top-level statements of `sql`, without their terminating semicolons."""
    out: list[str] = []
    buf: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if ch in "'\"":
            end = i + 1
            while end < n:
                if sql[end] == ch:
                    if end + 1 < n and sql[end + 1] == ch:
                        end += 2
                        continue
                    break
                end += 1
            buf.append(sql[i : end + 1])
            i = end + 1
            continue
        if ch == "$":
            m = _DOLLAR.match(sql, i)
            if m is not None:
                end = sql.find(m.group(0), m.end())
                end = n if end < 0 else end + len(m.group(0))
                buf.append(sql[i:end])
                i = end
                continue
        if ch == "\\" and (not "".join(buf).strip() or sql[i - 1] == "\n"):
            raise ValueError(f"psql meta-command in script: {sql[i : sql.find(chr(10), i)]!r}")
        if ch == ";":
            stmt = "".join(buf).strip()
            if stmt:
                out.append(stmt)
            buf = []
            i += 1
            continue
        buf.append(ch)
        i += 1
    tail = "".join(buf).strip()
    if tail:
        out.append(tail)
    return out


def _options(stmt: str) -> dict[str, str]:
    args = stmt[stmt.index("pg_logical_slot_get_changes(") :]
    args = args[: args.index(")")]
    return dict(_OPTION_PAIR.findall(args))


def load(name: str, rename: dict[str, str] | None = None) -> Script:
    """The script `name`; `rename` replaces substrings of its text first (to run a
    variant that leaves out one feature, e.g. a GID test_decoding filters)."""
    script = Script(name)
    slot_made = False
    text = (DATA / f"{name}.sql").read_text()
    for old, new in (rename or {}).items():
        text = text.replace(old, new)
    for stmt in split_statements(text):
        low = stmt.lower()
        if "pg_create_logical_replication_slot(" in low:
            args = low[low.index("pg_create_logical_replication_slot(") :]
            script.two_phase = bool(re.search(r"'test_decoding'\s*,\s*\w+\s*,\s*true", args))
            slot_made = True
        elif "pg_drop_replication_slot(" in low:
            break
        elif "pg_logical_slot_peek_changes(" in low:
            continue
        elif "pg_logical_slot_get_changes(" in low:
            if not script.options:
                script.options = {"skip-empty-xacts": "0", **_options(stmt)}
            script.workload.append(DRAIN)
        elif slot_made:
            script.workload.append(stmt)
        else:
            script.setup.append(stmt)
    if not slot_made or DRAIN not in script.workload:
        raise ValueError(f"{name}.sql creates no slot or reads no changes")
    return script
