"""simrun's engine: load a scenario, run tutor / student / judge episodes concurrently, summarise the records.

    import engine
    scenario = engine.load_scenario("scenarios/crescendo.yaml", overrides=["limit=20"])
    result = engine.run_sync(scenario, out=Path("runs"))
    print(result.summary["harm"])

Importing `engine` configures nothing global (no logging, no event loop policy) and loads no provider SDK.

The names are listed, with their types, in `__init__.pyi`; each loads on first use, so `simrun --help` and a
plug-in that needs one class do not pay for the statistics and reporting stack.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
