"""`simrun cache stats|clear`: inspect or empty the response cache (engine.models._cache) from the shell."""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from engine.models._cache import CacheError, ResponseCache, default_cache_path

__all__ = ("cache_group",)


class _CacheUsageError(click.ClickException):
    exit_code = 2


def _open_existing(path: Path | None) -> ResponseCache | None:
    target = path.expanduser() if path is not None else default_cache_path()
    if not target.exists():
        click.echo(f"no response cache at {target}")
        return None
    try:
        return ResponseCache(target)
    except CacheError as exc:
        raise _CacheUsageError(str(exc)) from None


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


_path_option = click.option(
    "--path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The cache file (default: $XDG_CACHE_HOME/simrun/responses.sqlite3 or ~/.cache/simrun/...).",
)


@click.group(name="cache")
def cache_group() -> None:
    """Inspect or empty the response cache that `--cache` runs read and write."""


@cache_group.command(name="stats")
@_path_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
def cache_stats(path: Path | None, as_json: bool) -> int:
    """Print how many replies the cache holds, its size on disk, and the entries per model."""
    cache = _open_existing(path)
    if cache is None:
        return 0
    with cache:
        info = cache.stats()
    for per_process in ("hits", "misses"):  # counted in this process: always 0 here
        del info[per_process]
    if as_json:
        click.echo(orjson.dumps(info, option=orjson.OPT_SORT_KEYS).decode())
        return 0
    click.echo(f"cache: {info['path']}")
    click.echo(f"entries: {info['entries']:,}")
    click.echo(f"size: {_human_size(info['bytes'])}")
    for model, count in info["by_model"].items():
        click.echo(f"  {model}: {count:,}")
    return 0


@cache_group.command(name="clear")
@_path_option
def cache_clear(path: Path | None) -> int:
    """Delete every cached reply (the next cached run calls the models again)."""
    cache = _open_existing(path)
    if cache is None:
        return 0
    with cache:
        removed = cache.clear()
    click.echo(f"removed {removed:,} entries from {cache.path}")
    return 0
