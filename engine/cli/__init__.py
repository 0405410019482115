"""Layer 7, the command line: a thin layer over the library that maps errors to exit codes."""
