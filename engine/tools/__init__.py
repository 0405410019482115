"""Layer 6, the tools over the layers: serve, view, compare, calibrate, embed, load testing, the library run."""
