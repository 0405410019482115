"""Sandboxed templates for scenario text (prompts, cues, scripted lines): user text is rendered, never run.

One place decides how templates are compiled and checked, so every plug-in rejects the same mistakes the same
way: syntax errors, variables the caller does not provide, and operations the sandbox forbids. A render is
also bounded: every value it builds stays under `MAX_TEMPLATE_CHARS` (checked before a `*`, `**`, padding or
replacement allocates, and after each filter, call and `~`), loops and calls share `MAX_TEMPLATE_STEPS`,
and a render stops after `MAX_RENDER_S`. Jinja's own sandbox bounds `range` alone, and only per call.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import itertools
import operator
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any, Final

import jinja2
from jinja2 import meta, nodes, pass_environment, pass_eval_context
from jinja2.exceptions import SecurityError
from jinja2.filters import make_attrgetter
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = (
    "MAX_RENDER_S",
    "MAX_RUN_TEMPLATE_S",
    "MAX_TEMPLATE_CHARS",
    "MAX_TEMPLATE_STEPS",
    "TemplateBudget",
    "check_template",
    "render",
)

MAX_TEMPLATE_CHARS: Final = 1_000_000
"""Longest string (or list) a template may build, and longest output."""
MAX_TEMPLATE_STEPS: Final = 200_000
"""Loop iterations plus calls in one render."""
MAX_RENDER_S: Final = 2.0
"""Wall-clock limit of one render."""
MAX_RUN_TEMPLATE_S: Final = 1.0
"""CPU seconds every render of one run may spend together (pre-run check and run), plus
`_RUN_TEMPLATE_S_PER_EPISODE` per planned episode: a slow template fails once, not once per episode."""
_RUN_TEMPLATE_S_PER_EPISODE: Final = 0.0005
_MAX_POWER_BITS: Final = 4096
_MAX_WRAP_WORK: Final = 4 * 10**9  # characters textwrap copies: about the square of the text over the width
_MAX_LIPSUM_WORDS: Final = 100_000
_BIG_WIDTH = re.compile(r"\d{7,}")  # a format width or precision of a million or more


class TemplateBudget:
    """The CPU time all renders of one run may spend, shared by the pre-run check and the run itself.

    Without it a template that renders in just under the per-render limit costs that much for every episode:
    the pre-run check alone would take minutes. `active()` makes it the budget of every render in the block
    (tasks and worker threads started inside inherit it).
    """

    def __init__(self, episodes: int = 0) -> None:
        self.limit_s = MAX_RUN_TEMPLATE_S + _RUN_TEMPLATE_S_PER_EPISODE * episodes
        self.used_s = 0.0

    @contextlib.contextmanager
    def active(self) -> Iterator[TemplateBudget]:
        token = _RUN_BUDGET.set(self)
        try:
            yield self
        finally:
            _RUN_BUDGET.reset(token)


_RUN_BUDGET: contextvars.ContextVar[TemplateBudget | None] = contextvars.ContextVar("run_template_budget", default=None)


class _Budget:
    def __init__(self) -> None:
        self.steps = 0
        self.deadline = time.monotonic() + MAX_RENDER_S
        self.run = _RUN_BUDGET.get()
        self.started = time.thread_time()

    def tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_TEMPLATE_STEPS:
            raise SecurityError(f"the template takes more than {MAX_TEMPLATE_STEPS:,} loop steps and calls")
        if self.steps % 256 == 0:
            if time.monotonic() > self.deadline:
                raise SecurityError(f"the template takes longer than {MAX_RENDER_S:g} s to render")
            self.check_run()

    def check_run(self) -> None:
        if self.run is not None and self.run.used_s + time.thread_time() - self.started > self.run.limit_s:
            raise SecurityError(f"the templates of this run take more than {self.run.limit_s:g} s of CPU together")

    def settle(self) -> None:
        if self.run is not None:
            self.run.used_s += time.thread_time() - self.started


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("template_budget", default=None)


def _tick() -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.tick()


def _sized(value: Any) -> Any:
    if isinstance(value, str | bytes):
        _sized_len(len(value))
    elif isinstance(value, list | tuple | dict | set | frozenset):
        _sized_len(_printed_len(value))
    elif isinstance(value, int) and value.bit_length() > _MAX_POWER_BITS:
        raise SecurityError(f"the template builds an integer of more than {_MAX_POWER_BITS} bits")
    return value


def _printed_len(value: Any) -> int:
    """About how long `value` is once printed, counting shared elements as often as they print (a list of
    100,000 references to one 100,000-element list prints 10^10 numbers); stops past the limit."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str | bytes):
            total += len(item) + 2
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)
            if total <= MAX_TEMPLATE_CHARS:
                stack.extend(item)
        elif isinstance(item, dict):
            total += 2 + 4 * len(item)
            if total <= MAX_TEMPLATE_CHARS:
                stack.extend(item.keys())
                stack.extend(item.values())
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 2
        else:
            total += 24
        if total > MAX_TEMPLATE_CHARS:
            return total
    return total


def _check_args(args: Iterable[Any]) -> None:
    for arg in args:
        if isinstance(arg, int) and abs(arg) > MAX_TEMPLATE_CHARS:
            raise SecurityError(f"the template passes a number over {MAX_TEMPLATE_CHARS:,} to a call")
        if isinstance(arg, str) and "%" in arg and _BIG_WIDTH.search(arg):
            raise SecurityError("the template formats with a width or precision of a million or more")


def _bounded_iter(iterable: Any) -> Iterator[Any]:
    for value in iterable:
        _tick()
        yield value


def _replace_size(text: str, old: str, new: str, count: int = -1) -> None:
    hits = text.count(old) if old else len(text) + 1
    if count >= 0:
        hits = min(hits, count)
    _sized_len(len(text) + hits * (len(new) - len(old)))


def _sized_len(length: int) -> None:
    if length > MAX_TEMPLATE_CHARS:
        raise SecurityError(f"the template builds a value longer than {MAX_TEMPLATE_CHARS:,}")


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox plus size, step and time limits (see the module docstring)."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def call_binop(self, context: jinja2.runtime.Context, operator_name: str, left: Any, right: Any) -> Any:
        _tick()
        if operator_name == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(times, int):
                    _sized_len(len(seq) * max(times, 0))
                    if isinstance(seq, list | tuple):
                        _sized_len(_printed_len(seq) * max(times, 0))
            bits = left.bit_length() + right.bit_length() if isinstance(left, int) and isinstance(right, int) else 0
            if bits > _MAX_POWER_BITS:
                raise SecurityError(f"the template computes a product of more than {_MAX_POWER_BITS} bits")
        elif operator_name == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
            if right * abs(left).bit_length() > _MAX_POWER_BITS:
                raise SecurityError(f"the template computes a power of more than {_MAX_POWER_BITS} bits")
        elif operator_name == "%" and isinstance(left, str):
            _check_args([left])
        return _sized(super().call_binop(context, operator_name, left, right))

    def call(self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _tick()
        _check_args([*args, *kwargs.values()])
        target = inspect.unwrap(__obj)  # the sandbox wraps str.format
        owner = getattr(target, "__self__", None)
        if isinstance(owner, str) and getattr(target, "__name__", None) == "replace":
            _replace_size(owner, *args, **kwargs)
        if isinstance(owner, str) and getattr(target, "__name__", None) in ("format", "format_map"):
            _check_args([owner.replace("{", "%")])
        return _sized(super().call(__context, __obj, *args, **kwargs))

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, "_bounded_iter", [], [], None, None, lineno=loop.lineno)
        literals = [n for n in tree.find_all((nodes.List, nodes.Dict, nodes.Tuple)) if getattr(n, "ctx", "") != "store"]
        for node in [*tree.find_all(nodes.Filter), *tree.find_all(nodes.Concat), *literals]:
            if not (isinstance(node, nodes.Filter) and (node.name == "_bounded_iter" or node.node is None)):
                _wrap_sized(tree, node)
        return tree


def _wrap_sized(tree: nodes.Node, target: nodes.Expr) -> None:
    """Replace `target` in its parent by `target|_sized`."""
    for parent in tree.find_all(nodes.Node):
        for field in parent.fields:
            value = getattr(parent, field, None)
            if value is target:
                setattr(parent, field, nodes.Filter(target, "_sized", [], [], None, None, lineno=target.lineno))
                return
            if isinstance(value, list):
                for index, entry in enumerate(value):
                    if entry is target:
                        value[index] = nodes.Filter(target, "_sized", [], [], None, None, lineno=target.lineno)
                        return


def _checked_filter(name: str, check: Callable[..., None] | None = None) -> Callable[..., Any]:
    """A built-in filter that checks its arguments first (keeping Jinja's pass-context marker)."""
    original: Callable[..., Any] = _ENV.filters[name]
    skip = 1 if getattr(original, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(original)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _tick()
        _check_args([*args[skip:], *kwargs.values()])
        if check is not None:
            check(*args[skip:], **kwargs)
        return original(*args, **kwargs)

    return checked


def _check_replace(text: Any, old: Any, new: Any, count: int | None = None) -> None:
    _replace_size(str(text), str(old), str(new), -1 if count is None else operator.index(count))


def _check_wordwrap(text: Any, width: int = 79, break_long_words: bool = True, wrapstring: Any = None, *_: Any) -> None:
    length, width = len(str(text)), max(operator.index(width), 1)
    if length > 10_000 and length * length // width > _MAX_WRAP_WORK:
        raise SecurityError(f"the template wraps {length:,} characters at width {width}: too slow")
    _sized_len(length + length // width * len(str(wrapstring or "\n")))


def _check_slice(value: Any, count: int, fill_with: Any = None) -> None:
    _sized_len(2 * operator.index(count))  # `slice` builds every one of its `count` lists, empty or not


def _check_batch(value: Any, count: int, fill_with: Any = None) -> None:
    if fill_with is not None:
        _sized_len(2 * operator.index(count))  # the last batch is padded to `count`


def _check_indent(text: Any, width: Any = 4, *_: Any, **__: Any) -> None:
    text = str(text)
    step = len(width) if isinstance(width, str) else operator.index(width)
    _sized_len(len(text) + (text.count("\n") + 1) * max(step, 0))


def _bounded_join(eval_ctx: Any, value: Any, d: Any = "", attribute: Any = None) -> Any:
    """`join`, its result's length checked before it is built."""
    _tick()
    items = _sized(list(value))
    if isinstance(d, str):
        _sized_len(len(d) * max(len(items) - 1, 0) + _printed_len(items))
    return _JOIN(eval_ctx, items, d, attribute)


def _bounded_sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    """`sum`; of lists or tuples (`start=[]`) in one pass of known size, not one copy per element."""
    _tick()
    values = _sized(list(iterable))
    if not isinstance(start, list | tuple):
        return _SUM(environment, values, attribute, start)
    if attribute is not None:
        values = list(map(make_attrgetter(environment, attribute), values))
    if not all(isinstance(value, type(start)) for value in values):
        raise TypeError(f"sum(start={type(start).__name__}) of values of other types")
    _sized_len(len(start) + sum(len(value) for value in values))
    _sized_len(_printed_len(start) + sum(_printed_len(value) for value in values))
    return type(start)(itertools.chain(start, *values))


def _bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> Any:
    _tick()
    if operator.index(n) * operator.index(max) > _MAX_LIPSUM_WORDS:
        raise SecurityError(f"lipsum of more than {_MAX_LIPSUM_WORDS:,} words")
    lipsum: Callable[..., Any] = _LIPSUM
    return lipsum(n, html, min, max)


_ENV = _BoundedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)
_ENV.filters["_bounded_iter"] = _bounded_iter
_ENV.filters["_sized"] = _sized
for _name in ("center", "truncate", "format"):
    _ENV.filters[_name] = _checked_filter(_name)
_ENV.filters["replace"] = _checked_filter("replace", _check_replace)
_ENV.filters["wordwrap"] = _checked_filter("wordwrap", _check_wordwrap)
_ENV.filters["indent"] = _checked_filter("indent", _check_indent)
_ENV.filters["slice"] = _checked_filter("slice", _check_slice)
_ENV.filters["batch"] = _checked_filter("batch", _check_batch)
_JOIN: Final = _ENV.filters["join"]
_SUM: Final = _ENV.filters["sum"]
_LIPSUM: Final[Callable[..., Any]] = _ENV.globals["lipsum"]  # type: ignore[assignment]
_ENV.filters["join"] = functools.update_wrapper(pass_eval_context(_bounded_join), _JOIN)
_ENV.filters["sum"] = functools.update_wrapper(pass_environment(_bounded_sum), _SUM)
_ENV.globals["lipsum"] = _bounded_lipsum


@lru_cache(maxsize=256)
def _compile(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


def check_template(source: str, allowed: Iterable[str] | None = None) -> str:
    """Compile once at load time so a broken template is a scenario error, not a mid-run failure.

    Args:
        source: The template text.
        allowed: The only variables it may use (None: any; missing ones then fail when rendered).
    """
    try:
        tree = _ENV.parse(source)
        _compile(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"template syntax error on line {exc.lineno}: {exc.message}") from None
    except (RecursionError, MemoryError):
        raise ValueError("template is nested too deeply") from None
    if allowed is not None:
        names = sorted(set(allowed))
        unknown = sorted(meta.find_undeclared_variables(tree) - set(names))
        if unknown:
            raise ValueError(
                f"template refers to {', '.join(map(repr, unknown))}, which is not provided here; "
                f"available: {', '.join(names)}"
            )
    return source


def render(source: str, variables: Mapping[str, Any]) -> str:
    """Render in the sandbox, within the limits; a missing variable is an error rather than an empty string."""
    budget = _Budget()
    token = _BUDGET.set(budget)
    try:
        budget.check_run()
        parts: list[str] = []
        length = 0
        for chunk in _compile(source).generate(**variables):
            length += len(chunk)
            _sized_len(length)
            parts.append(chunk)
        return "".join(parts).strip()
    except jinja2.UndefinedError as exc:
        raise ValueError(f"template refers to an unknown value: {exc.message}") from None
    except SecurityError as exc:
        raise ValueError(f"template tried an unsafe operation: {exc}") from None
    except (jinja2.TemplateError, ArithmeticError, TypeError, ValueError) as exc:
        raise ValueError(f"template failed: {type(exc).__name__}: {exc}") from None
    except RecursionError:
        raise ValueError("template failed: it recurses too deeply") from None
    except MemoryError:
        raise ValueError("template failed: it needs too much memory") from None
    except Exception as exc:  # any other failure of the user's template (IndexError from format_map, ...)
        raise ValueError(f"template failed: {type(exc).__name__}: {exc}") from None
    finally:
        budget.settle()
        _BUDGET.reset(token)
