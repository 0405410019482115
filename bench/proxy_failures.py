"""How fast a run ends when the endpoint is a proxy whose answer is always the same failure.

`scenarios/crescendo.yaml` (660 dialogues, concurrency 64) with the tutor pointed at a loopback server that
answers like a LiteLLM proxy: a misnamed model (HTTP 400, "Invalid model name"), and a dead backend behind
it (HTTP 502 on every attempt). Each case runs as a user would (`python -m engine ...`), with the probe and
then with `--no-probe` where the probe would stop it. Printed per case: exit code, wall time (interpreter
start included), attempts the server saw, retries and error records from the manifest, run directories left.
Run: `python bench/proxy_failures.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from anyio.from_thread import start_blocking_portal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeOpenAI, Reply  # noqa: E402 - the repository root is on the path now

MISNAMED = {"error": {"message": "Invalid model name passed in model=gpt-4o-typo", "type": "None", "code": "400"}}
DEAD = {"error": {"message": "litellm.APIConnectionError: Connection refused (backend 10.0.0.7:8000)"}}


def _reply(request: Any, *, body: dict[str, Any], status: int) -> Reply:
    return Reply(status=status, body=body)


def main() -> None:
    env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "sk-bench-not-a-real-key")}
    print(f"{'case':<26} {'exit':>4} {'wall s':>7} {'attempts':>9} {'retries':>8} {'errors':>7} {'run dirs':>9}")
    cases: list[tuple[str, dict[str, Any], list[str]]] = [
        ("misnamed model (400)", MISNAMED, []),
        ("dead backend (502)", DEAD, []),
        ("dead backend, --no-probe", DEAD, ["--no-probe"]),
    ]
    for label, body, extra in cases:
        status = 400 if body is MISNAMED else 502
        fake = FakeOpenAI(partial(_reply, body=body, status=status))
        with (
            start_blocking_portal() as portal,
            portal.wrap_async_context_manager(fake),
            tempfile.TemporaryDirectory() as out,
        ):
            tutor = f"models.tutor={{model: openai/gpt-4o-typo, base_url: '{fake.base_url}'}}"
            command = [sys.executable, "-m", "engine", "scenarios/crescendo.yaml", "--set", tutor, "--out", out]
            started = time.perf_counter()
            subprocess_result = subprocess.run([*command, *extra], cwd=ROOT, env=env, capture_output=True, timeout=900)
            wall = time.perf_counter() - started
            attempts = sum(1 for seen in fake.seen if seen.path.endswith("/chat/completions"))
            manifests = list(Path(out).glob("*/manifest.json"))
            manifest = orjson.loads(manifests[0].read_bytes()) if manifests else {}
            retries = (manifest.get("calls") or {}).get("retries", 0)
            errors = (manifest.get("counts") or {}).get("error", 0)
            dirs = len([p for p in Path(out).iterdir() if p.is_dir()])
            code = subprocess_result.returncode
            print(f"{label:<26} {code:>4} {wall:>7.1f} {attempts:>9} {retries:>8} {errors:>7} {dirs:>9}")


if __name__ == "__main__":
    main()
