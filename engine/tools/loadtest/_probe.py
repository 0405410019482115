"""Is anything listening at the target? Asked once before the schedule starts, so a wrong address or a server
that is down fails the run in seconds instead of after the whole schedule of connection errors."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import anyio

__all__ = ("PROBE_TIMEOUT_S", "probe_target", "unreachable_gate")

PROBE_TIMEOUT_S = 3.0


async def probe_target(target: str, *, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the target's host accepts a TCP connection on its port; otherwise why it does not.

    A connection is enough: any HTTP answer, even an error, means the server is there to be measured.
    """
    url = urlsplit(target)
    host = url.hostname or ""
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return f"{target} has no valid port"
    if not host:
        return f"{target} names no host"
    try:
        with anyio.fail_after(timeout_s):
            stream = await anyio.connect_tcp(host, port)
            await stream.aclose()
    except TimeoutError:
        return f"no answer from {host}:{port} within {timeout_s:g} s"
    except OSError as exc:
        return f"cannot connect to {host}:{port} ({exc.strerror or exc})"
    return None


def unreachable_gate(target: str, reason: str) -> dict[str, Any]:
    """The gates of a run that never started: one failed check, and what to do about it."""
    return {
        "valid": False,
        "client_bound": False,
        "machine_late": False,
        "coordinated_omission": False,
        "checks": {"target_reachable": {"target": target, "reason": reason, "ok": False}},
        "notes": [f"the target is unreachable ({reason}): is the server up and the address right? Nothing was sent"],
    }
