"""The long version of ``tests/reliability/test_load.py``: N runs train at once on a live
service while many websocket clients follow them and pollers hit the API; prints the
figures (API latency percentiles, events delivered, lost or duplicated events, "database is
locked" lines) and writes them to ``bench/results/reliability-load-<time>.json``.

::

    python -m bench.reliability_load                          # 2 runs x 60k steps, 100 clients
    python -m bench.reliability_load --runs 4 --clients 400 --steps 200000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from tests.reliability.helpers import ReliableService, database_problems
from tests.reliability.load import drive
from tests.service_harness import tiny_ppo_spec

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs training at once (= workers)")
    parser.add_argument("--clients", type=int, default=100, help="websocket followers")
    parser.add_argument("--pollers", type=int, default=4, help="API polling threads")
    parser.add_argument("--steps", type=int, default=60_000, help="env steps per run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="nnx-ppo-load-") as tmp:
        svc = ReliableService(Path(tmp) / "data", args=["--workers", str(args.runs)]).start()
        try:
            started = time.monotonic()
            ids = [
                svc.submit({**tiny_ppo_spec(args.steps), "name": f"load-{i}"})["id"]
                for i in range(args.runs)
            ]
            result = drive(svc, ids, args.clients, args.pollers, timeout=3600)
            seconds = time.monotonic() - started
            last_seq = {run_id: len(svc.stored_events(run_id)) for run_id in ids}
            figures = {
                **vars(args),
                "seconds": round(seconds, 1),
                **result.figures(),
                "api_p90_ms": round(1000 * result.p(0.90), 1),
                "api_p999_ms": round(1000 * result.p(0.999), 1),
                "clients_with_lost_or_duplicated_events": sum(
                    f.seqs != list(range(1, last_seq[f.run_id] + 1)) for f in result.followers
                ),
                "clients_not_closed_1000": sum(f.close_code != 1000 for f in result.followers),
                "api_errors": len(result.errors),
                "database_is_locked_lines": svc.output.read_text().count("database is locked"),
                "runs": {run_id: svc.run(run_id)["status"] for run_id in ids},
                "database_problems": database_problems(svc.db_url),
            }
        finally:
            svc.close()
    print(json.dumps(figures, indent=2))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"reliability-load-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
