"""Layer 7, the command line: a thin layer over the library that maps errors to exit codes."""

import gc

__all__ = ("console_main",)


def console_main() -> int:
    """The `simrun` program: `engine.cli._main.main`, with the garbage collector kept off the start-up heap.

    Importing the command line builds tens of thousands of objects that live until exit (modules, pydantic
    models, plug-in tables) and almost no garbage, so the collector is off while it imports and the result
    is frozen (`gc.freeze`): no later collection walks it again, during the run or while the interpreter
    tears the modules down at exit, which the heap is also frozen for. An embedding that calls `main` keeps
    its collector as it was.
    """
    gc.disable()
    try:
        from engine.cli._main import main
    finally:
        gc.freeze()
        gc.enable()
    code = main()
    gc.freeze()
    return code
