"""The envelope of every `--json` output: which gpunode wrote it, the version of the
output's shape (`schema`), and what kind of output it is.

The payload's keys sit beside these three, not under a key of their own, so a script
reads `doc["hosts"]` (`jq .hosts`) whatever the kind; no payload uses the three names.
docs/json.md documents every kind and `gpunode schema --output KIND` prints its schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, get_args

from gpunode import __version__

SCHEMA = 1
"""Raised when a field is removed or changes meaning; new fields may come within a version."""

Kind = Literal[
    "hosts",
    "check",
    "facts",
    "envs",
    "plan",
    "apply-event",
    "report",
    "smoke",
    "top-sample",
    "lab-status",
    "tags",
    "config",
    "cost",
    "doctor",
]
KINDS: tuple[Kind, ...] = get_args(Kind)
STREAMS: frozenset[Kind] = frozenset({"apply-event", "top-sample"})
"""Kinds printed as JSON lines, one envelope per line; the others are one document."""

RESERVED = frozenset({"gpunode", "schema", "kind"})


def envelope(kind: Kind, payload: Mapping[str, Any]) -> dict[str, Any]:
    """`payload` in the envelope of `kind`."""
    clash = RESERVED & payload.keys()
    if clash:
        raise ValueError(f"a {kind} payload may not use the envelope's keys: {sorted(clash)}")
    return {"gpunode": __version__, "schema": SCHEMA, "kind": kind, **payload}


def dumps(kind: Kind, payload: Mapping[str, Any]) -> str:
    """The output's text: one line for a stream's kind, an indented document otherwise.
    `ensure_ascii` (the default) escapes every control character a value may carry."""
    indent = None if kind in STREAMS else 2
    return json.dumps(envelope(kind, payload), indent=indent, default=str)
