"""`simrun serve`: the loopback OpenAI-compatible server, its options, request parsing, replies and limits."""
