"""Load-testing mode: simulated students' multi-turn conversations as load on an OpenAI-compatible API.

`simrun loadtest` (or `engine.run_load` from Python) drives conversations arriving at a constant or Poisson rate, or a
fixed number at once, and measures what the endpoint sustains: throughput, TTFT, ITL, TPOT and end-to-end
latency from both the scheduled and the actual send, goodput against SLOs, errors by type, and the validity
gates that say whether the client itself was the bottleneck.
"""
