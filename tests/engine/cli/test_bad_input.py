"""Bad input never escapes as a traceback: arbitrary YAML exits 2 with a message; arbitrary bodies are errors."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import ChatRequest, ModelSpec, ProviderError, RequestContext, ScenarioError, build_scenario
from engine.cli._main import main
from engine.core import _inputs as inputs
from engine.core._templates import check_template, render
from engine.models._openai import OpenAIChatModel
from tests.helpers import ITEMS, scenario_data, write_bank

_scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=8)
_documents = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bad-input")
    write_bank(folder / "bank.yaml")
    return folder


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=_documents)
def test_arbitrary_yaml_documents_exit_2(workdir: Path, document: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Any YAML document given as a scenario is refused with exit code 2 and a one-paragraph message."""
    path = workdir / "doc.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err


@st.composite
def _mutations(draw: st.DrawFn) -> tuple[list[str | int], Any]:
    """A path into a valid scenario and a replacement value for it."""
    data: Any = scenario_data()
    path: list[str | int] = []
    while isinstance(data, dict | list) and data and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(data) if isinstance(data, dict) else list(range(len(data)))))
        path.append(key)
        data = data[key]
    return path, draw(_documents)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutations())
def test_mutated_scenarios_fail_only_as_scenario_errors(workdir: Path, mutation: tuple[list[str | int], Any]) -> None:
    """Replacing any part of a valid scenario with arbitrary data is either still valid or a `ScenarioError`."""
    path, value = mutation
    data: Any = scenario_data()
    if not path:
        data = value
    else:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    with contextlib.suppress(ScenarioError):
        build_scenario(data if isinstance(data, dict) else {"name": data}, base_dir=workdir)


_bodies = st.one_of(
    st.binary(max_size=200),
    _documents.map(lambda d: yaml.safe_dump(d).encode()),
    st.dictionaries(st.sampled_from(["id", "choices", "usage", "model", "object"]), _documents, max_size=5).map(
        orjson.dumps
    ),
)


@settings(max_examples=80, deadline=None)
@given(status=st.sampled_from([200, 200, 200, 201, 400, 404, 429, 500, 502]), body=_bodies)
async def test_arbitrary_server_bodies_are_errors_or_replies(status: int, body: bytes) -> None:
    """Whatever an endpoint answers, the provider returns a reply or raises `ProviderError` — nothing else."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, content=body, headers={"content-type": "application/json"})

    spec = ModelSpec(model="openai/x", base_url="http://127.0.0.1:9/v1", api_key_env="UNUSED", timeout_s=5)
    model = OpenAIChatModel(spec, transport=httpx2.MockTransport(answer))
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], context=RequestContext(role="tutor"))
    try:
        reply = await model.complete(request)
    except ProviderError:
        pass
    else:
        assert isinstance(reply.text, str) and reply.usage.prompt_tokens >= 0
    finally:
        await model.aclose()


# -- hostile input: every class exits 2 with a message, quickly, before anything walks the tree -------------------

_BOMB = "lol0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 9)
)


def _scenario_file(folder: Path, extra: str = "", **changes: Any) -> Path:
    path = folder / "hostile.yaml"
    path.write_text(yaml.safe_dump(scenario_data(**changes), sort_keys=False) + extra, encoding="utf-8")
    return path


def _refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error:") and "Traceback" not in err
    return " ".join(err.split())


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("unused:\n" + "".join(f"  {line}\n" for line in _BOMB.splitlines()), "aliases expand the document beyond"),
        ("unused: &me [1, *me]\n", "alias *me refers to a node that contains it"),
        ("unused: &me {a: *me}\n", "alias *me refers to a node that contains it"),
        ("unused: " + "[" * 600 + "]" * 600 + "\n", "nesting deeper than 100 levels"),
        ("unused: " + "{a: " * 600 + "1" + "}" * 600 + "\n", "nesting deeper than 100 levels"),
        ("unused: " + "9" * 5000 + "\n", "integer too long"),
        ("unused: 100000000000000000000000000000\n", "does not fit in 64 bits"),
    ],
    ids=["alias-bomb", "self-alias-list", "self-alias-map", "deep-list", "deep-map", "long-int", "big-int"],
)
def test_hostile_yaml_is_refused_while_composing(
    workdir: Path, capsys: pytest.CaptureFixture[str], extra: str, expected: str
) -> None:
    """Alias bombs (even under a key nobody reads), cyclic aliases, deep nesting and huge integers fail as YAML."""
    message = _refused(["validate", str(_scenario_file(workdir, extra))], capsys)
    assert "invalid YAML" in message and expected in message


def test_hostile_values_in_overrides_are_refused(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A `--set` or `--model` value goes through the same bounded parser as the file."""
    bomb = "{" + ", ".join(f"k{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10) if i else 'x'}]" for i in range(9)) + "}"
    scenario = str(_scenario_file(workdir))
    assert "aliases expand" in _refused(["validate", scenario, "--set", f"tutor.x={bomb}"], capsys)
    nested = "{model: sim/tutor, params: " + "[" * 300 + "]" * 300 + "}"
    assert "nesting deeper" in _refused(["validate", scenario, "--model", f"tutor={nested}"], capsys)


@pytest.mark.parametrize("target", ["/dev/zero", "directory", "fifo"])
def test_item_files_that_are_not_regular_files_are_refused(
    workdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """Devices and FIFOs are refused before any read (reading /dev/zero never ends); a bank cannot be a folder."""
    if target == "fifo":
        path = str(tmp_path / "pipe")
        os.mkfifo(path)
    else:
        path = str(tmp_path) if target == "directory" else target
    scenario = _scenario_file(workdir, items=[{"source": "bank", "path": path}])
    message = _refused(["validate", str(scenario)], capsys)
    assert "is not a regular file" in message or "is a directory" in message


def test_oversized_files_are_refused(
    workdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scenario or item file over the size cap is refused by its size, not read."""
    monkeypatch.setattr(inputs, "MAX_FILE_BYTES", 4096)
    big = write_bank(tmp_path / "big.yaml", [{**ITEMS[0], "id": f"i{n}"} for n in range(100)])
    scenario = _scenario_file(workdir, items=[{"source": "bank", "path": str(big)}])
    assert "over the 4,096-byte limit" in _refused(["validate", str(scenario)], capsys)
    scenario.write_text(scenario.read_text() + "# padding\n" * 500)
    assert "scenario file is over the 4,096-byte limit" in _refused(["validate", str(scenario)], capsys)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ 'a' * 10**10 }}", "builds a value longer than"),
        ("{{ ['a'] * 10**9 }}", "builds a value longer than"),
        ("{{ 2 ** 100000 }}", "power of more than"),
        ("{% for i in range(99999) %}{% for j in range(99999) %}x{% endfor %}{% endfor %}", "loop steps"),
        ("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}", "loop steps"),
        ("{{ 'a'|center(10**10) }}", "a number over"),
        ("{{ 'a'.ljust(10**10) }}", "a number over"),
        ("{{ ('a' * 1000)|replace('a', 'a' * 1000)|replace('a', 'a' * 1000) }}", "builds a value longer than"),
        ("{{ '%1000000000d'|format(1) }}", "width or precision"),
        ("{{ '{:>1000000000}'.format(1) }}", "width or precision"),
        (
            "{% set ns = namespace(x='ab') %}{% for i in range(60) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}",
            "builds a value longer than",
        ),
        ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recurses too deeply"),
    ],
)
def test_template_bombs_stop_quickly(template: str, expected: str) -> None:
    """Templates that would allocate gigabytes or loop for hours fail in the sandbox with a reason."""
    with pytest.raises(ValueError, match="template") as caught:
        render(check_template(template), {})
    assert expected in str(caught.value)


def test_template_exponential_macro_stops_at_the_time_limit() -> None:
    """Recursion that fans out without loops is stopped by the render-time limit."""
    template = "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}"
    with pytest.raises(ValueError, match="loop steps and calls|longer than"):
        render(template, {})


def test_ordinary_templates_still_render() -> None:
    """The limits leave everyday templates alone: filters, loops, concatenation and formatting."""
    template = (
        "{{ item.domain|upper }} {% for w in item.words %}{{ w ~ '!' }}{% endfor %} {{ '%.1f'|format(2.25) }} "
        "{{ 'x y'|replace(' ', '-') }} {{ [1, 2]|join(',') }} {{ ('ab' * 3)|truncate(4, True, '', 0) }}"
        "{% filter lower %} Q{% endfilter %}"
    )
    assert render(template, {"item": {"domain": "math", "words": ["a", "b"]}}) == "MATH a!b! 2.2 x-y 1,2 abab q"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "replicates=10000000"], "the plan has 120,000,000 episodes, over the limit of 200,000"),
        (["--set", "replicates=10", "--max-episodes", "100"], "over the limit of 100"),
        (["--set", "student.max_backtracks=1000000000"], "student.max_backtracks: Input should be less than or equal"),
        (["--set", "models.tutor.rpm=1e-300"], "models.tutor.rpm: Input should be greater than or equal to 1"),
        (["--set", "models.tutor.tpm=.nan"], "models.tutor.tpm"),
        (["--set", "judge_votes=1000000000"], "judge_votes: Input should be less than or equal to 99"),
        (["--set", "concurrency=1000000000000"], "concurrency: Input should be less than or equal"),
        (["--set", "models.tutor.timeout_s=1e300"], "models.tutor.timeout_s"),
        (["--set", "seed=-1"], "seed: Input should be greater than or equal to 0"),
        (["--model", 'tutor={model: openai/x, base_url: "::::"}'], "models.tutor.base_url: Value error, expected"),
        (["--model", "tutor={model: openai/x, base_url: 'ftp://host/v1'}"], "expected an http:// or https:// URL"),
        (["--model", "tutor={model: openai/x, base_url: 'http://h:99999/v1'}"], "not a URL"),
        (["--set", "items.0.domains=[astrology]"], "the item sources gave no items"),
        (["--set", "factors={dimension: [cognitive], format: [single]}", "--set", "items.0.fixed=1"], ""),
    ],
)
def test_budgets_rates_urls_and_plan_sizes_are_bounded(
    workdir: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    """Each bound is checked before planning or calling; `--dry-run` used to hang on a huge `max_backtracks`."""
    assert expected in _refused(["run", "--dry-run", str(_scenario_file(workdir)), *args], capsys)


def test_a_plan_with_no_compatible_condition_is_refused(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Items whose pinned factors match no condition make an empty plan, which is an error and not a 0/0 run."""
    bank = write_bank(workdir / "pinned.yaml", [{**item, "fixed": {"format": "essay"}} for item in ITEMS])
    scenario = _scenario_file(workdir, items=[{"source": "bank", "path": bank.name}])
    assert "the plan has no episodes" in _refused(["validate", str(scenario)], capsys)


def test_max_episodes_lets_a_big_plan_through_on_purpose(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The plan cap is a guard against typos, so an explicit flag lifts it; `--limit` keeps a huge plan cheap."""
    scenario = str(_scenario_file(workdir, replicates=20))
    assert main(["validate", scenario, "--max-episodes", "240"]) == 0
    assert main(["run", "--dry-run", scenario, "--set", "replicates=10000000", "--limit", "5"]) == 0
    assert "5 episodes" in capsys.readouterr().out


_depth = st.integers(0, 6)
_HOSTILE: list[tuple[str, Any]] = [
    ("extra", lambda d: "unused:\n" + "".join(f"  {line}\n" for line in _BOMB.splitlines()[: d.draw(_depth) + 2])),
    ("extra", lambda d: f"unused: &x {d.draw(st.sampled_from(['[*x]', '{k: *x}', '[1, [2, *x]]']))}\n"),
    ("extra", lambda d: "unused: " + "[" * (101 + d.draw(_depth) * 100) + "]" * (101 + d.draw(_depth) * 100) + "\n"),
    ("set", lambda d: f"seed={d.draw(st.integers(2**64, 10**40))}"),
    ("set", lambda d: f"replicates={d.draw(st.integers(20_000, 10**12))}"),
    ("set", lambda d: f"student.max_backtracks={d.draw(st.integers(51, 10**12))}"),
    ("set", lambda d: f"models.tutor.rpm={d.draw(st.floats(1e-300, 0.99))}"),
    ("set", lambda d: f"judge_votes={d.draw(st.integers(100, 10**12))}"),
    ("set", lambda d: f"items.0.path={d.draw(st.sampled_from(['/dev/zero', '/dev/null', '/dev/urandom']))}"),
    ("set", lambda d: f"items.0.domains=[{d.draw(st.sampled_from(['none', 'art', 'z']))}]"),
    ("model", lambda d: f"tutor={{model: openai/x, base_url: '{d.draw(st.sampled_from(['::::', 'x', 'ftp://a']))}'}}"),
    ("set", lambda d: 'tutor.system_prompt=\'{{ "a" * ' + str(d.draw(st.integers(10**7, 10**12))) + " }}'"),
    (
        "set",
        lambda d: (
            "tutor.system_prompt='{% for i in range(" + str(d.draw(st.integers(500, 99_999))) + ") %}"
            "{% for j in range(99999) %}x{% endfor %}{% endfor %}'"
        ),
    ),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_scenarios_exit_2_quickly(
    workdir: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    """One or more hostile changes from every class above, in any combination: exit 2 with a message, never a
    traceback or a hang (the whole test runs in seconds)."""
    chosen = data.draw(st.lists(st.sampled_from(range(len(_HOSTILE))), min_size=1, max_size=3))
    extra, args = "", []
    for index in chosen:
        where, make = _HOSTILE[index]
        value = make(data)
        if where == "extra":
            extra += value if "unused" not in extra else value.replace("unused", f"unused{len(extra)}")
        else:
            args += ["--set" if where == "set" else "--model", value]
    _refused(["run", "--dry-run", str(_scenario_file(workdir, extra)), *args], capsys)


def test_bounded_loops_keep_jinja_loop_semantics() -> None:
    """Wrapping every loop's iterable for the step budget keeps `loop.length`, `else` and recursive loops."""
    assert render("{% for x in xs %}{{ loop.index }}/{{ loop.length }} {% endfor %}", {"xs": "ab"}) == "1/2 2/2"
    assert render("{% for x in xs %}{{ x }}{% else %}none{% endfor %}", {"xs": []}) == "none"
    tree = [{"name": "a", "kids": [{"name": "b", "kids": []}]}]
    template = "{% for n in tree recursive %}{{ n.name }}{% if n.kids %}[{{ loop(n.kids) }}]{% endif %}{% endfor %}"
    assert render(template, {"tree": tree}) == "a[b]"
