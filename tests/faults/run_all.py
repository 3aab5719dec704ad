"""The whole fault suite as a script: every scenario of tests/faults/scenarios.py in
turn (among them the standby pair's takeover after kill -9 of the active worker), then
the standby promotion on PG15 and PG18 (tests/faults/promotion.py), then the table
(scenario | behaviour | lost | duplicated | partial | out of order | aborted visible |
recovery seconds).

    PGCDC_STATE_DIR=... python -m tests.faults.run_all [--quick] [NAME-SUBSTRING...]

It starts fault-pg15, fault-kafka and fault-registry (deploy/local/services.py) and
stops them at the end; the promotion rebuilds, promotes and then stops the HA pairs
(ha-pg15/ha-pg15s, ha-pg18/ha-pg18s), each under its /tmp/ha-*.lock. Exit status 0
when every row counts zeros, else 1. The full run takes about 25 minutes on the
2-core machine; --quick shortens the outages and the number of kills.
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.faults.promotion import PROMOTION_VERSIONS, promotion_name, run_promotion
from tests.faults.scenarios import SCENARIOS, Result, run_scenario, table
from tests.fixtures import services

FAULT_SERVICES = ("fault-pg15", "fault-kafka", "fault-registry")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--keep-services", action="store_true")
    parser.add_argument("names", nargs="*", help="run only scenarios whose name contains one")
    args = parser.parse_args(argv)

    def wanted(name: str) -> bool:
        return not args.names or any(n in name for n in args.names)

    chosen = [s for name, s in SCENARIOS.items() if wanted(name)]
    promotions = [v for v in PROMOTION_VERSIONS if wanted(promotion_name(v))]
    infos = {name: services.ensure_service(name) for name in FAULT_SERVICES}
    results: list[Result] = []
    began = time.monotonic()
    try:
        for scenario in chosen:
            print(f"--- {scenario.name}", file=sys.stderr, flush=True)
            result = run_scenario(scenario, infos, quick=args.quick)
            infos = {name: services.ensure_service(name) for name in FAULT_SERVICES}
            results.append(result)
            print(table([result]), file=sys.stderr, flush=True)
            for example in result.verdict.examples:
                print(f"    {example}", file=sys.stderr)
        for version in promotions:
            print(f"--- {promotion_name(version)}", file=sys.stderr, flush=True)
            kafka, registry = infos["fault-kafka"], infos["fault-registry"]
            result = run_promotion(version, kafka, registry)
            results.append(result)
            print(table([result]), file=sys.stderr, flush=True)
            for example in result.verdict.examples:
                print(f"    {example}", file=sys.stderr)
    finally:
        if not args.keep_services:
            services._services("down", *FAULT_SERVICES)
    print(table(results))
    print(f"\n{len(results)} scenarios in {time.monotonic() - began:.0f}s")
    clean = all(not r.error and r.verdict.clean for r in results)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
