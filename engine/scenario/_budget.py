"""Spending limits for a run: tokens and dollars, checked before each episode is admitted.

Researchers pay for these runs; a limit that is only noticed at the end is no limit. Prices are USD per
million tokens, from the scenario's `prices` (keyed by model spec, e.g. `openai/gpt-4o-mini`), else from the
price data of the installed `genai-prices` package (a maintained catalogue of providers' list prices, pinned
with simrun so a run's prices are those of a known version; `price_source` names it). `sim/...` is free; an
`http/...` product has no list price. A model with no known price cannot be held to a dollar limit, so asking
for one is a scenario error rather than a silent zero. A catalogue price is the base tier's (the first
thousand tokens), since a run's tokens are priced in aggregate, not per call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata

from pydantic import BaseModel, ConfigDict, Field

from engine.core._errors import ScenarioError
from engine.core._format import format_count, format_usd

__all__ = ("Budget", "Price", "Spend", "format_usd", "price_of", "price_source", "spend")


class Price(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    input: float = Field(ge=0)
    output: float = Field(ge=0)


_CATALOGUE = "genai-prices"
_UNLISTED = frozenset({"sim", "http"})
"""Providers the catalogue is not asked about: the simulator is free, a product has no list price."""
_SAMPLE = 1000


def price_source() -> str:
    """Where prices not set in the scenario come from: the catalogue package and its version."""
    try:
        return f"{_CATALOGUE} {metadata.version(_CATALOGUE)}"
    except metadata.PackageNotFoundError:
        return f"{_CATALOGUE} (not installed: only the scenario's prices)"


def price_of(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of a `provider/name` model: the scenario's, then the catalogue's; the simulator is free."""
    if model in prices:
        return prices[model]
    provider, _, name = model.partition("/")
    if provider == "sim":
        return Price(input=0, output=0)
    if provider in _UNLISTED:
        return None
    return _listed(provider, name)


@lru_cache(maxsize=1024)
def _listed(provider: str, name: str) -> Price | None:
    """The catalogue's price; a LiteLLM route names its provider first (`litellm/gemini/gemini-2.0-flash`)."""
    if provider == "litellm":
        provider, _, rest = name.partition("/")
        provider, name = (provider, rest) if rest else ("", provider)
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    try:
        found = calc_price(
            Usage(input_tokens=_SAMPLE, output_tokens=_SAMPLE), model_ref=name, provider_id=provider or None
        )
    except LookupError:
        return None
    scale = 1_000_000 / _SAMPLE
    return Price(input=float(found.input_price) * scale, output=float(found.output_price) * scale)


@dataclass(frozen=True)
class Budget:
    """A run's limits; either may be None (no limit)."""

    max_cost: float | None = None
    max_tokens: int | None = None

    def check_prices(self, models: list[str], prices: Mapping[str, Price]) -> None:
        """Refuse a dollar limit that some model's spending could not be counted against."""
        if self.max_cost is None:
            return
        unknown = sorted({m for m in models if price_of(m, prices) is None})
        if unknown:
            raise ScenarioError(
                f"--max-cost needs a price for {', '.join(unknown)}: add them under `prices:` in the scenario, "
                "e.g. `prices: {openai/my-model: {input: 0.5, output: 1.5}}` (USD per million tokens)"
            )

    def cost(self, usage_by_model: Mapping[str, tuple[int, int]], prices: Mapping[str, Price]) -> float:
        """Dollars spent so far, from (prompt, completion) tokens per model."""
        total = 0.0
        for model, (prompt, completion) in usage_by_model.items():
            price = price_of(model, prices)
            if price is not None:
                total += (prompt * price.input + completion * price.output) / 1_000_000
        return total

    def exceeded(self, usage_by_model: Mapping[str, tuple[int, int]], prices: Mapping[str, Price]) -> str | None:
        """Why the run must stop admitting episodes, or None while it is within its limits."""
        tokens = sum(p + c for p, c in usage_by_model.values())
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"token budget reached: {format_count(tokens)} of {format_count(self.max_tokens)} tokens used"
        if self.max_cost is not None:
            spent = self.cost(usage_by_model, prices)
            if spent >= self.max_cost:
                return f"cost budget reached: {format_usd(spent)} of {format_usd(self.max_cost)} spent"
        return None


@dataclass(frozen=True)
class Spend:
    """Tokens and dollars per role and model; what the progress line, the manifest and the report show."""

    rows: list[tuple[str, str, int, int, float | None]]
    """(role, model, prompt tokens, completion tokens, USD or None when the model has no known price)."""

    @property
    def by_model(self) -> dict[str, float | None]:
        found: dict[str, float | None] = {}
        for _, model, _, _, usd in self.rows:
            found[model] = None if usd is None else (found.get(model) or 0.0) + usd  # one price per model
        return found

    @property
    def total(self) -> float:
        """Dollars over the priced models (see `unpriced`)."""
        return sum(usd for usd in self.by_model.values() if usd is not None)

    @property
    def unpriced(self) -> list[str]:
        return sorted(model for model, usd in self.by_model.items() if usd is None)

    @property
    def tokens(self) -> int:
        return sum(p + c for _, _, p, c, _ in self.rows)

    def manifest(self) -> dict[str, object]:
        """`cost_usd` of manifest.json."""
        return {
            "by_model": {m: None if usd is None else round(usd, 6) for m, usd in sorted(self.by_model.items())},
            "total": round(self.total, 6),
            "unpriced": self.unpriced,
            "price_source": price_source(),
        }


def spend(tokens_by_role: Mapping[str, Mapping[str, Sequence[int]]], prices: Mapping[str, Price]) -> Spend:
    """Priced usage from `role -> model -> [prompt, completion]` tokens."""
    rows: list[tuple[str, str, int, int, float | None]] = []
    for role, models in sorted(tokens_by_role.items()):
        for model, (prompt, completion) in sorted(models.items()):
            price = price_of(model, prices)
            usd = None if price is None else (prompt * price.input + completion * price.output) / 1_000_000
            rows.append((role, model, int(prompt), int(completion), usd))
    return Spend(rows)
