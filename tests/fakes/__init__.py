"""In-process fakes that let tests exercise real network code paths without external services."""
