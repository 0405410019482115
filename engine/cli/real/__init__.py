"""A real language model offline: a pinned small model and llama.cpp from the package registries, served on loopback
behind an OpenAI-compatible API, for seeing real text go through simrun (not for measuring a tutor)."""
