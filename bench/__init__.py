"""Benchmarks and calibration studies: scripts that print figures (importable so tests can reuse their set-ups)."""
