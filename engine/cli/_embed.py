"""`simrun embed`: an item source's texts → embedding vectors, in the file `retrieval: embeddings` reads."""

from __future__ import annotations

import time
from pathlib import Path

import click
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from engine.core._errors import ScenarioError
from engine.scenario._load import parse_model_override
from engine.scenario._spec import ModelSpec
from engine.tools._embed import check_embedding_model, embed_with, source_intake, source_texts, write_vectors

__all__ = ("embed_command",)


def _model_spec(text: str) -> ModelSpec:
    data = parse_model_override(text, "--model")  # the bounded parser every --model goes through
    if isinstance(data, list):
        raise ScenarioError(f"--model {text!r}: embeddings take one model")
    try:
        spec = ModelSpec.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"--model {text!r}: not a model spec ({exc})") from None
    check_embedding_model(spec, text)
    return spec


@click.command(name="embed")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--source", default="cases", show_default=True, help="Item source that reads PATH.")
@click.option(
    "--model",
    "model_text",
    required=True,
    metavar="SPEC",
    help="Embedding model: provider/model (sim/embed, openai/text-embedding-3-small) or a YAML model spec, "
    "e.g. '{model: openai/nomic-embed-text, base_url: http://localhost:11434/v1, transport: lean}'.",
)
@click.option("--batch", type=click.IntRange(1, 2048), default=64, show_default=True, help="Texts per request.")
@click.option(
    "-o", "--out", type=click.Path(path_type=Path, dir_okay=False), required=True, help="The vectors file to write."
)
@click.option("--no-probe", is_flag=True, help="Skip the one cheap call made to the endpoint before embedding.")
def embed_command(path: Path, source: str, model_text: str, batch: int, out: Path, no_probe: bool) -> int:
    """Embed the texts of the items in PATH and write {id: vector} to OUT, for `retrieval: embeddings`."""
    spec = _model_spec(model_text)
    texts = source_texts(source, path)
    intake = source_intake(source, path)
    Console(stderr=True, soft_wrap=True).print(
        Text(f"items: {intake.line()}", style="yellow" if intake.skipped else "dim")
    )
    started = time.perf_counter()
    vectors = embed_with(spec, list(texts.values()), batch=batch, probe=not no_probe)
    write_vectors(out, list(texts), vectors)
    console = Console(soft_wrap=True)
    console.print(
        f"wrote {len(vectors)} vectors of {len(vectors[0])} dimensions from {spec.model} to {out} "
        f"in {time.perf_counter() - started:.2f}s"
    )
    if spec.provider == "sim":
        console.print("[dim]sim/embed hashes words and character trigrams: it is not a language model.[/]")
    return 0
