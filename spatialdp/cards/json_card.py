"""The model card as JSON for machines: the shipped schema, validation and the content digest.

``model_card.schema.json`` (JSON Schema draft 2020-12) ships inside this
package. A card is validated against it when written and when read. Schema 2
states the neighbouring relation of every count of people (exact under
replace-one, noised under add/remove) in place of schema 1's coarsened labels,
which were no protection (the report files beside the card held the exact
counts) and no relation at all to the noise. The ``digest`` field is the SHA-256
of the canonical JSON of every other field: it catches accidents and naive
edits (someone able to rewrite the file can recompute it, so keep published
cards where readers cannot write).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from spatialdp.exceptions import InvalidCard

__all__ = ["SCHEMA_VERSION", "InvalidCard", "canonical_digest", "load_schema", "validate_card"]

#: Version of ``model_card.schema.json``.
SCHEMA_VERSION = "2.2.0"
#: Versions read back: 2.1.0 and 2.2.0 only add optional fields to 2.0.0.
READABLE_VERSIONS = ("2.0.0", "2.1.0", SCHEMA_VERSION)


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return resources.files("spatialdp.cards").joinpath("model_card.schema.json").read_text(
        encoding="utf-8")


def load_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) shipped with the package.

    Examples
    --------
    >>> schema = load_schema()
    >>> schema["$schema"], SCHEMA_VERSION in schema["properties"]["schema_version"]["enum"]
    ('https://json-schema.org/draft/2020-12/schema', True)
    """
    schema: dict[str, Any] = json.loads(_schema_text())
    return schema


@lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    # The shipped schema is checked against the 2020-12 metaschema by the tests
    # (tests/test_cards.py), not on every run: that check cost the demo 0.3 s of CPU.
    return Draft202012Validator(load_schema())


def canonical_digest(content: Mapping[str, Any]) -> str:
    """Return ``sha256:<hex>`` of the canonical JSON of ``content`` without its ``digest``.

    Raises
    ------
    InvalidCard
        A value JSON cannot hold exactly (NaN, infinity, an object).
    """
    body = {k: v for k, v in content.items() if k != "digest"}
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidCard(f"card content cannot be written as JSON ({err}); "
                          "build the card with ModelCard.build") from err
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def validate_card(content: Mapping[str, Any], *, check_digest: bool = True) -> None:
    """Raise :class:`InvalidCard` unless ``content`` is a valid card.

    Parameters
    ----------
    content : mapping
        The card (``ModelCard.to_dict()`` or a parsed ``model_card.json``).
    check_digest : bool, default True
        Also recompute the content digest and compare it with ``digest``.

    Raises
    ------
    InvalidCard
        The first schema violation (with its JSON path), or a digest mismatch.
    """
    if not isinstance(content, Mapping):
        raise InvalidCard(f"card={type(content).__name__} is not a JSON object; "
                          "pass a model card's dict or load model_card.json")
    from jsonschema.exceptions import best_match

    version = content.get("schema_version")
    if isinstance(version, str) and version not in READABLE_VERSIONS:
        raise InvalidCard(
            f"card has schema_version={version!r}; this spatialdp reads {SCHEMA_VERSION} "
            "(schema 2 states the neighbouring relation of every count of people). Rebuild "
            "the card from its run folder with ModelCard.from_run (or `spatialdp card`)")
    errors = list(_validator().iter_errors(dict(content)))
    if errors:
        first = best_match(errors)
        while first.context:  # descend into oneOf/anyOf to the most relevant leaf
            first = best_match(first.context)
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        raise InvalidCard(
            f"card at {where} fails the model card schema {SCHEMA_VERSION}: "
            f"{first.message[:300]}; rebuild the card with ModelCard.build or from_run "
            f"({len(errors)} problem(s) in all)")
    if check_digest:
        expected = canonical_digest(content)
        if content.get("digest") != expected:
            raise InvalidCard(
                f"card digest={str(content.get('digest'))[:20]}... does not match its content "
                "(the file was edited or damaged); rebuild it with ModelCard.from_run")
