"""The model card as Markdown for people: figures by relative path, tables, provenance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["render_markdown"]


def render_markdown(content: Mapping[str, Any]) -> str:
    """Return the Markdown of a card's content (``ModelCard.to_dict()``)."""
    raise NotImplementedError
