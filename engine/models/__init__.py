"""Layer 2, calling models: providers, the OpenAI wire format, the one retry loop, throttling, the cache."""
