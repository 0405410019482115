"""How fast a run against an endpoint where nothing listens ends, and how much it prints on the way.

`scenarios/crescendo.yaml` (660 dialogues) with the tutor pointed at a closed port, run as a user would
(`python -m engine ...`), with and without the probe. Printed per case: exit code, wall time (interpreter
start included), retries and error records from the manifest, and stderr lines.
Run: `python bench/dead_endpoint.py`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # free once closed: nothing listens there


def main() -> None:
    port = _closed_port()
    tutor = f"models.tutor={{model: openai/gpt-4o-mini, base_url: 'http://127.0.0.1:{port}/v1'}}"
    env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "sk-bench-not-a-real-key")}
    print(f"{'case':<12} {'exit':>4} {'wall s':>7} {'retries':>8} {'errors':>7} {'stderr lines':>13}")
    for label, extra in (("probe", []), ("--no-probe", ["--no-probe"])):
        with tempfile.TemporaryDirectory() as out:
            command = [sys.executable, "-m", "engine", "scenarios/crescendo.yaml", "--set", tutor, "--out", out]
            started = time.perf_counter()
            done = subprocess.run([*command, *extra], cwd=ROOT, env=env, capture_output=True, timeout=600)
            wall = time.perf_counter() - started
            manifests = list(Path(out).glob("*/manifest.json"))
            manifest = orjson.loads(manifests[0].read_bytes()) if manifests else {}
            retries = (manifest.get("calls") or {}).get("retries", 0)
            errors = (manifest.get("counts") or {}).get("error", 0)
            lines = done.stderr.decode("utf-8", "replace").count("\n")
            print(f"{label:<12} {done.returncode:>4} {wall:>7.1f} {retries:>8} {errors:>7} {lines:>13}")


if __name__ == "__main__":
    main()
