"""Report blocks: a kind declares what to show (tables, forest and dot plots, heatmaps, survival curves,
histograms, notes) from its typed summary; the engine renders them once each as markdown, terminal tables and
HTML. See `BlockSummarizer`."""

from .console import console_blocks
from .dots import Dot, DotPanel, Dots, DotSeries
from .histogram import Bar, BarPanel, Histogram
from .html import html_blocks
from .markdown import markdown_blocks
from .model import (
    Block,
    BlockCell,
    Brief,
    Bullets,
    Forest,
    ForestPanel,
    Heatmap,
    Interval,
    Note,
    Section,
    Strong,
    Table,
)
from .rates import SUMMARY_CONFIG, ClusteredRateSummary, ContrastSummary, RateSummary
from .summarizer import BlockSummarizer
from .survival import Curve, CurvePoint, Survival

__all__ = (
    "SUMMARY_CONFIG",
    "Bar",
    "BarPanel",
    "Block",
    "BlockCell",
    "BlockSummarizer",
    "ClusteredRateSummary",
    "ContrastSummary",
    "Brief",
    "Bullets",
    "Curve",
    "CurvePoint",
    "Dot",
    "DotPanel",
    "DotSeries",
    "Dots",
    "Forest",
    "ForestPanel",
    "Heatmap",
    "Histogram",
    "Interval",
    "Note",
    "RateSummary",
    "Section",
    "Strong",
    "Survival",
    "Table",
    "console_blocks",
    "html_blocks",
    "markdown_blocks",
)
