"""Report blocks: a kind declares what to show (tables, forest plots, heatmaps, notes) from its typed summary;
the engine renders them once each as markdown, terminal tables and HTML. See `BlockSummarizer`."""

from .console import console_blocks
from .grid import GridPanel, HeatGrid
from .html import html_blocks
from .markdown import markdown_blocks
from .model import Block, BlockCell, Brief, Forest, ForestPanel, Heatmap, Interval, Note, Section, Strong, Table
from .summarizer import BlockSummarizer

__all__ = (
    "Block",
    "BlockCell",
    "BlockSummarizer",
    "Brief",
    "Forest",
    "ForestPanel",
    "GridPanel",
    "HeatGrid",
    "Heatmap",
    "Interval",
    "Note",
    "Section",
    "Strong",
    "Table",
    "console_blocks",
    "html_blocks",
    "markdown_blocks",
)
