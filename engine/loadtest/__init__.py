"""Load-testing mode: simulated students' multi-turn conversations as load on an OpenAI-compatible API.

`simrun loadtest` (or `run_load` from Python) drives conversations arriving at a constant or Poisson rate, or a
fixed number at once, and measures what the endpoint sustains: throughput, TTFT, ITL, TPOT and end-to-end
latency from both the scheduled and the actual send, goodput against SLOs, errors by type, and the validity
gates that say whether the client itself was the bottleneck.
"""

from . import mode  # noqa: F401  (registers the `load` run mode)
from .config import Gates, LoadConfig, Slo, Sweep
from .records import RequestRecord
from .run import LoadResult, rebuild_summary, run_load

__all__ = ("Gates", "LoadConfig", "LoadResult", "RequestRecord", "Slo", "Sweep", "rebuild_summary", "run_load")
