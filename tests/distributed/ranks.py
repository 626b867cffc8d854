"""Spawns the ranks of a 2-process (or N-process) scenario on 127.0.0.1.

Each rank is a fresh interpreter running ``rank_worker.py SCENARIO`` with
MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE set, as torchrun would. The port is
free at spawn time (asked of the kernel); Gloo is kept on the loopback
interface. Every rank writes a JSON result into the run folder. Waits are
bounded, and every rank's process group is killed on the way out, whatever
happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from torch_openreg._local_ranks import LocalRanks, free_port, rank_environment

HERE = Path(__file__).resolve().parent
WORKER = HERE / "rank_worker.py"


@dataclass
class RankOutcome:
    rank: int
    returncode: int
    output: str
    result: dict | None


def run_ranks(
    scenario: str, folder: Path, world: int = 2, timeout: float = 120.0, env: dict | None = None
) -> list[RankOutcome]:
    """Runs the scenario on `world` ranks; returns each rank's outcome."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    logs = []
    try:
        with LocalRanks() as ranks:
            for rank in range(world):
                rank_env = rank_environment(
                    rank, world, port, RANK_RESULT=str(folder / f"rank{rank}.json"), RANK_FOLDER=str(folder)
                )
                rank_env.update(env or {})
                log = open(folder / f"rank{rank}.log", "w+")
                logs.append(log)
                ranks.spawn([sys.executable, str(WORKER), scenario], rank_env, stdout=log, stderr=subprocess.STDOUT)
            ranks.wait_all(timeout)
            outcomes = []
            for rank, (proc, log) in enumerate(zip(ranks.procs, logs)):
                timed_out = proc.poll() is None
                log.flush()
                log.seek(0)
                output = log.read()
                path = folder / f"rank{rank}.json"
                result = json.loads(path.read_text()) if path.exists() else None
                code = -999 if timed_out else proc.returncode
                outcomes.append(RankOutcome(rank, code, output, result))
            return outcomes
    finally:
        for log in logs:
            log.close()


def expect_success(outcomes: list[RankOutcome]) -> list[dict]:
    """Every rank exited 0 and wrote a result; returns the results by rank."""
    for o in outcomes:
        assert o.returncode == 0 and o.result is not None, (
            f"rank {o.rank} exited {o.returncode} (-999: killed after the timeout):\n{o.output[-6000:]}"
        )
    return [o.result for o in outcomes]
