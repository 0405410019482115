"""Layer 1, what a scenario is: the schema, YAML loading with overrides, items and the plan."""
