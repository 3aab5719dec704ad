#!/usr/bin/env bash
# The one entry point for developers and CI.
#   bash deploy/local/dev.sh test            install what is missing, start the services, run the suite
#   bash deploy/local/dev.sh pgcdc demo      the same environment, then any command inside the venv
#   bash deploy/local/dev.sh services up|down|status|env|kill|list [component...]
#                                            (see deploy/local/services.py for the names)
# The venv lives in .venv; the services' state in .state/ (both git-ignored).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
venv="$root/.venv"
# The install builds the native core (service/native) too, so its sources key the stamp:
# an edited crate is rebuilt on the next run. cargo comes from rustup's usual place.
export PATH="$HOME/.cargo/bin:$PATH"
stamp="$venv/.installed-$(cat pyproject.toml service/native/Cargo.toml service/native/Cargo.lock \
    $(find service/native/src -name '*.rs' | sort) | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "dev.sh: installing the project and its pinned dependencies into .venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet -e ".[dev]"
    rm -f "$venv"/.installed-*
    touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    test)
        # Start every service the suite needs (idempotent), then run it. pytest's exit code is
        # passed through, including 5 (no tests collected), which callers treat as failure.
        python deploy/local/services.py up
        exec python -m pytest "$@"
        ;;
    services)
        exec python deploy/local/services.py "$@"
        ;;
    "")
        echo "usage: dev.sh test [pytest args] | dev.sh services up|down|status|env|kill|list | dev.sh COMMAND..." >&2
        exit 2
        ;;
    *)
        exec "$cmd" "$@"
        ;;
esac
