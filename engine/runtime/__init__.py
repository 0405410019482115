"""Layer 4, running: plug-in seams, the built scenario, the runner and the run directory contract."""
