"""The model card as JSON for machines: the shipped schema, validation and the content digest."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spatialdp.exceptions import InvalidInput

__all__ = ["SCHEMA_VERSION", "InvalidCard", "load_schema", "validate_card"]

#: Version of ``model_card.schema.json``.
SCHEMA_VERSION = "1.0.0"


class InvalidCard(InvalidInput):
    """A model card that fails its schema or its content digest."""


def load_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) shipped with the package."""
    raise NotImplementedError


def validate_card(content: Mapping[str, Any], *, check_digest: bool = True) -> None:
    """Raise :class:`InvalidCard` unless ``content`` is a valid card."""
    raise NotImplementedError
