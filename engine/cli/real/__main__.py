"""`make real`: install the pinned model and llama.cpp, serve the model on loopback, and run a shipped scenario
with the tutor on it (the student and the judge stay on the simulator unless `--judge-too`).

    python -m engine.cli.real --scenario SCENARIO [--limit 4] [--judge-too]
    python -m engine.cli.real --calibrate LABELS --judge NAME   # `simrun calibrate`, the model as the judge
"""

from __future__ import annotations

import argparse
import os
import sys

from engine.cli.real._runtime import API_KEY_ENV, RealModelUnavailable, install, serving, tutor_spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.cli.real", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", help="the scenario to run with the tutor on the model")
    parser.add_argument("--limit", type=int, default=4, help="episodes to run (default 4)")
    parser.add_argument("--judge-too", action="store_true", help="the judge on the model as well (one vote)")
    parser.add_argument("--calibrate", metavar="LABELS", help="calibrate the model as a judge on LABELS instead")
    parser.add_argument("--judge", help="with --calibrate: the registered judge whose rubric the model answers")
    parser.add_argument("--out", default="runs")
    args = parser.parse_args(argv)
    if bool(args.calibrate) == bool(args.scenario) or bool(args.calibrate) != bool(args.judge):
        parser.error("give --scenario SCENARIO, or --calibrate LABELS with --judge NAME")
    try:
        runtime = install()
    except RealModelUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    os.environ.setdefault(API_KEY_ENV, "local")
    from engine.cli._main import main as simrun

    with serving(runtime) as base_url:
        if args.calibrate:
            judge = f"judge={tutor_spec(base_url, max_tokens=200)}"
            options = [
                "--judge",
                args.judge,
                "--votes",
                "1",
                "--concurrency",
                "1",
                "--out",
                f"{args.out}/calibration",
            ]
            return simrun(["calibrate", args.calibrate, "--model", judge, *options])
        print(f"==> model served at {base_url}; running {args.scenario} with the tutor on it", file=sys.stderr)  # noqa: T201
        command = [args.scenario, "--model", f"tutor={tutor_spec(base_url)}", "--limit", str(args.limit)]
        command += ["--set", "concurrency=1", "--out", args.out]
        if args.judge_too:
            command += ["--model", f"judge={tutor_spec(base_url, max_tokens=200)}", "--set", "judge_votes=1"]
        return simrun(command)


if __name__ == "__main__":
    sys.exit(main())
