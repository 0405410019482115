"""Secrets never reach a file or the console, in any form; damaged run directories are messages, not tracebacks."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import orjson
import pytest
import yaml
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine.cli._main import main
from engine.core._errors import ScenarioError
from engine.core._events import Redactor, WarningGate, redact_url
from engine.models._cache import ResponseCache
from engine.runtime._rundir import RunDir
from engine.tools._view import ReportServer
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.helpers import make_scenario, scenario_data, write_bank

KEY = "sk-PLANT/key+Zz=9-abcdef"
PASSWORD = "pw-in-the-url-4242"
QUERY_SECRET = "qs-token-7777"


def _lower_hex(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda match: match.group().lower(), text)


def _forms(secret: str) -> set[str]:
    """Every encoding a secret must not reach a file or a stream in: raw, percent-encoded (either case),
    JSON-escaped, and base64 of `user:secret` (HTTP basic credentials)."""
    encoded = {quote(secret, safe=""), quote_plus(secret), quote(secret)}
    basic = {base64.b64encode(f"{user}:{secret}".encode()).decode() for user in ("user", "anyone")}
    return {secret, *encoded, *map(_lower_hex, encoded), json.dumps(secret)[1:-1], *basic}


def _scan(paths: list[Path], secrets: list[str]) -> list[str]:
    found = []
    for root in paths:
        for file in [root] if root.is_file() else root.rglob("*"):
            if file.is_file():
                data = file.read_bytes()
                found += [f"{file.name}: {form}" for s in secrets for form in _forms(s) if form.encode() in data]
    return found


def test_a_key_planted_through_every_path_is_found_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The key comes back in replies (exact and URL-encoded) and in error bodies; a password and a token sit in
    base URLs. Neither the run directory, the cache, nor the console holds any of them afterwards."""
    monkeypatch.setenv("SIMRUN_PLANT_KEY", KEY)
    monkeypatch.setattr("engine.models._retry.backoff_delay", lambda attempt: 0.0)
    echo = (
        f"exact {KEY} encoded {quote(KEY, safe='')} plus {quote_plus(KEY)} password {PASSWORD} {QUERY_SECRET} "
        f"lower {_lower_hex(quote(KEY, safe=''))} basic {base64.b64encode(f'anyone:{KEY}'.encode()).decode()} "
        f"url-basic {base64.b64encode(f'user:{PASSWORD}'.encode()).decode()} json {json.dumps(KEY)}"
    )

    def script(body: dict[str, Any]) -> Reply:
        if "judge" in str(body.get("model")):
            return Reply(status=400, error_code=f"bad request {KEY} {PASSWORD} {_lower_hex(quote(KEY, safe=''))}")
        return Reply(content=orjson.dumps({"message": echo, "rationale": echo}).decode())  # the attacker wants JSON

    with start_blocking_portal() as portal, portal.wrap_async_context_manager(FakeOpenAI(script)) as fake:
        port = fake.port
        data = scenario_data(limit=12, concurrency=1)  # 12 episodes: one judge surely fails 5 calls in a row
        base = f"http://user:{PASSWORD}@127.0.0.1:{port}/v1"
        data["models"] = {
            "tutor": {"model": "openai/tutor", "base_url": base, "api_key_env": "SIMRUN_PLANT_KEY"},
            "student": {"model": "openai/student", "base_url": base, "api_key_env": "SIMRUN_PLANT_KEY"},
            "judge": [{"model": "openai/judge", "base_url": base, "api_key_env": "SIMRUN_PLANT_KEY"}],
        }
        data["description"] = f"see http://127.0.0.1:9/v1?access_token={QUERY_SECRET}"
        data["models"]["judge"].append(
            {"model": "openai/judge-b", "base_url": f"http://127.0.0.1:{port}/v1?access_token={QUERY_SECRET}"}
        )
        write_bank(tmp_path / "bank.yaml")
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        cache = tmp_path / "cache.sqlite3"
        tutor_url = f"models.tutor.base_url={base}"  # the resume hint repeats every --set
        code = main(
            [str(path), "--out", str(tmp_path / "runs"), "--cache-path", str(cache), "--no-probe", "--set", tutor_url]
        )
        # with the probe: the query in judge-b's URL breaks its path, so the probe refuses it (the message too
        # must be redacted)
        again = main([str(path), "--out", str(tmp_path / "runs"), "--cache-path", str(cache)])
    printed = capsys.readouterr()
    assert code == 130 and again == 2, "the judge's 400s opened its breaker; its reason quotes the planted key"
    assert "judge model openai/judge-b at http://127.0.0.1" in " ".join(printed.err.split())
    runs = list((tmp_path / "runs").iterdir())
    records = (runs[0] / "episodes.jsonl").read_text(encoding="utf-8")
    assert "[redacted]" in records, "the planted key did reach the records, redacted"
    with ResponseCache(cache) as opened:
        assert opened.stats()["entries"] > 0, "replies that echoed the key were cached"
    assert _scan([*runs, *tmp_path.glob("cache.sqlite3*")], [KEY, PASSWORD, QUERY_SECRET]) == []
    assert not [form for s in (KEY, PASSWORD, QUERY_SECRET) for form in _forms(s) if form in printed.out + printed.err]
    assert "--set models.tutor.base_url=http://user:[redacted]@" in printed.err, "the resume hint, redacted"
    manifest = orjson.loads((runs[0] / "manifest.json").read_bytes())
    assert manifest["scenario"]["models"]["tutor"]["base_url"] == f"http://user:[redacted]@127.0.0.1:{port}/v1"
    # Whichever judge's breaker opens first gives the reason (judge quotes the key in its 400, judge-b's URL
    # carries the token); both quote a secret, and it is redacted either way.
    assert any(
        quoted in manifest["reason"] for quoted in ("bad request [redacted] [redacted]", "access_token=[redacted]")
    )


@given(secret=st.text(min_size=6, max_size=20).filter(lambda s: s.strip() == s and "[redacted]" not in s))
def test_every_form_of_a_secret_is_redacted(secret: str) -> None:
    redactor = Redactor([secret])
    text = " | ".join(sorted(_forms(secret)))
    redacted = redactor.text(f"before {text} after")
    assert redacted.startswith("before ") and redacted.endswith(" after")
    assert not [form for form in _forms(secret) if form in redacted.removeprefix("before ").removesuffix(" after")]


def test_credentials_in_a_url_are_redacted_and_the_rest_kept() -> None:
    url = "https://bob:hunter22@api.example.com/v1?api-version=2024-01-01&api_key=abcd1234&sig=zzzz9"
    assert redact_url(url) == (
        "https://bob:[redacted]@api.example.com/v1?api-version=2024-01-01&api_key=[redacted]&sig=[redacted]"
    )


def test_the_warning_gate_shows_one_per_key_and_interval_and_counts_the_rest() -> None:
    now = [0.0]
    gate = WarningGate(interval_s=10, clock=lambda: now[0])
    shown = []
    for step in range(100):
        now[0] = step * 0.5  # 50 s of warnings, one every half second
        for key in ("connection a", "timeout a"):
            held = gate.admit(key)
            if held is not None:
                shown.append((key, held))
    assert [held for key, held in shown if key == "connection a"] == [0, 19, 19, 19, 19]
    assert len(shown) == 10


# -- damaged run directories ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("good")
    return engine.run_sync(make_scenario(folder, limit=4), out=folder / "runs").run_dir


def _damage(run_dir: Path, how: str) -> None:
    episodes, manifest_path = run_dir / "episodes.jsonl", run_dir / "manifest.json"
    manifest = orjson.loads(manifest_path.read_bytes())
    if how == "episodes is a directory":
        episodes.unlink()
        episodes.mkdir()
    elif how == "garbage line":
        lines = episodes.read_bytes().splitlines(keepends=True)
        episodes.write_bytes(b"".join([lines[0], b"\x00\xff{not json\n", *lines[1:]]))
    elif how == "record of the wrong shape":
        with episodes.open("ab") as handle:
            handle.write(b'{"id": 3, "status": "maybe"}\n')
    elif how == "wrong-typed counts":
        manifest["counts"] = {"planned": "many", "ok": [1]}
    elif how == "token counts of the wrong shape":
        manifest["calls"]["tokens_by_model"] = {"sim/tutor": [1, 2, 3]}
    elif how == "manifest is a list":
        manifest_path.write_bytes(b"[1, 2]")
        return
    elif how == "load manifest":
        manifest["kind"] = "load"
    elif how == "plan of another run":
        (run_dir / "plan.json").write_bytes(orjson.dumps({"ids": ["a", "b"]}))
    manifest_path.write_bytes(orjson.dumps(manifest))


DAMAGE = [
    "episodes is a directory",
    "garbage line",
    "record of the wrong shape",
    "wrong-typed counts",
    "token counts of the wrong shape",
    "manifest is a list",
    "load manifest",
    "plan of another run",
]


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_run_directories_exit_2_with_a_message(
    good_run: Path, tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(good_run, run_dir)
    _damage(run_dir, how)
    (run_dir / "summary.json").unlink()  # view must rebuild the report, reading everything
    scenario = tmp_path / "s.yaml"
    write_bank(tmp_path / "bank.yaml")
    scenario.write_text(yaml.safe_dump(scenario_data(limit=4)), encoding="utf-8")
    for command in (
        ["report", str(run_dir)],
        ["compare", str(run_dir), str(good_run), "--out", str(tmp_path / "cmp")],
        [str(scenario), "--resume", str(run_dir)],
    ):
        assert main(command) == 2, (how, command)
        err = capsys.readouterr().err
        assert "error:" in err and "Traceback" not in err, (how, command, err)
    with pytest.raises(ScenarioError):
        ReportServer(run_dir, 0)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.lists(st.binary(max_size=40) | _json.map(orjson.dumps), max_size=3), at=st.integers(0, 4))
def test_any_line_in_episodes_jsonl_is_read_or_refused_with_a_message(
    good_run: Path, tmp_path_factory: pytest.TempPathFactory, extra: list[bytes], at: int
) -> None:
    run_dir = tmp_path_factory.mktemp("fuzz") / "run"
    shutil.copytree(good_run, run_dir)
    lines = (run_dir / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    planted = [line.replace(b"\n", b" ") + b"\n" for line in extra]
    (run_dir / "episodes.jsonl").write_bytes(b"".join(lines[:at] + planted + lines[at:]))
    try:
        current = RunDir(run_dir).current_records()
    except ScenarioError as exc:
        assert "episodes.jsonl:" in str(exc)
    else:
        assert len(current.records) == len(lines), "only valid records of planned ids count"
