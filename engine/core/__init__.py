"""Layer 0, the foundation every layer stands on: errors, registries, events, bounded input, records, text."""
