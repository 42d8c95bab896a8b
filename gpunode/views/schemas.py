"""The JSON Schema of every `--json` output, generated from the models that make it.

Each output kind has a pydantic model: the envelope's three fields, then its payload,
built from the dataclasses and models the output is made from (events, plans, run
results, facts, GPU samples), so a field added there shows here. `schema(kind)` is what
`gpunode schema --output KIND` prints; `validate(kind, text)` checks one output against
its model. `python -m gpunode.views.schemas DIR` writes them all (docs/schemas/).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model

from gpunode.doctor.model import Finding
from gpunode.events import EVENT_NAMES, FactsGathered, HostRecap, PlannedChange, SmokeCheck
from gpunode.execute.result import HostResult
from gpunode.facts.envexport import EnvExport
from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Document, Host, described
from gpunode.monitor.model import GpuProcess, LinkStatus
from gpunode.views.envelope import KINDS, Kind
from gpunode.views.top import TopGpu

# The inventory's fields described from their docstrings (left out of a plain import)
described()

JSON_SCHEMA = "https://json-schema.org/draft/2020-12/schema"
STRICT = ConfigDict(extra="forbid")
OPEN = ConfigDict(extra="allow")


class Envelope(BaseModel):
    """The three fields every output starts with."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    gpunode: str = Field(description="The version of gpunode that wrote it.")
    schema_version: Literal[1] = Field(
        alias="schema", description="The version of this output's shape."
    )


def _envelope(kind: str) -> dict[str, Any]:
    """An output model's `kind` field, fixed to `kind` (`Envelope` has the other two)."""
    return {"kind": (Literal[kind], Field(description="What this output is."))}


# -- dataclasses as models --------------------------------------------------------------------

# Fields whose JSON is not the dataclass's own: (class, field) -> the type of its JSON.
_FIELD_JSON: dict[tuple[type, str], Any] = {}
# Dataclasses whose `to_json` is not `asdict`: class -> the type of its JSON.
_CLASS_JSON: dict[type, Any] = {}


@functools.cache
def model_of(cls: type, extra: tuple[tuple[str, Any], ...] = ()) -> type[BaseModel]:
    """A strict pydantic model of a dataclass's JSON: its fields (nested dataclasses as
    models too), then `extra` fields, as `(name, (type, default or ...))`."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        typ = _json_type(_FIELD_JSON.get((cls, f.name), hints[f.name]))
        if f.default is not dataclasses.MISSING:
            fields[f.name] = (typ, f.default)
        elif f.default_factory is not dataclasses.MISSING:
            fields[f.name] = (typ, Field(default_factory=f.default_factory))
        else:
            fields[f.name] = (typ, ...)
    fields.update(extra)
    return _model(cls.__name__, _doc(cls), **fields)


def _doc(cls: type) -> str | None:
    """A class's own docstring; not the signature `dataclass` writes when it has none."""
    doc = cls.__doc__
    return None if doc is None or doc.startswith(f"{cls.__name__}(") else doc


def _model(name: str, doc: str | None, base: Any = None, /, **fields: Any) -> type[BaseModel]:
    """A model made at run time: strict unless `base` says otherwise."""
    config = None if base is not None else STRICT
    model: type[BaseModel] = create_model(  # type: ignore[call-overload, unused-ignore]
        name, __config__=config, __base__=base, __doc__=doc, **fields
    )
    return model


def _json_type(typ: Any) -> Any:
    """`typ` with every dataclass in it replaced by the type of its JSON."""
    if typ in _CLASS_JSON:
        return _CLASS_JSON[typ]
    if dataclasses.is_dataclass(typ) and isinstance(typ, type):
        return model_of(typ)
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if not args or origin is Literal or origin is Annotated:
        return typ
    mapped = tuple(_json_type(a) for a in args)
    if origin in (Union, types.UnionType):
        return Union[mapped]  # noqa: UP007 (built at run time)
    return origin[mapped]


# -- the payloads ------------------------------------------------------------------------------


class CostType(BaseModel):
    """One GPU type: hosts with the same `gpus.model` at the same price per GPU-hour."""

    model_config = STRICT
    model: str
    hosts: list[str]
    gpus: int | None = Field(description="GPUs of the type in the fleet (None: no gpus.count).")
    currency: str
    gpu_hour: float = Field(description="The price of one GPU for one hour.")
    bf16_tflops: float | None = Field(
        description="Measured bf16 matmul TFLOP/s of one GPU: the median of each host's newest "
        "result in the run records. None: never measured."
    )
    measured_hosts: int
    last_measured: float | None
    runs: list[str] = Field(description="The run records the figures come from.")
    tflops_per_cost: float | None
    cost_per_pflops_hour: float | None


class CostOption(BaseModel):
    model_config = STRICT
    model: str
    currency: str
    gpu_hours: float | None
    gpus_needed: int | None
    gpus: int | None
    cost: float | None
    fits: bool
    why: str = Field(description="Why the type cannot do the job; empty when it fits.")


class CostWork(BaseModel):
    model_config = STRICT
    pflop: float
    hours: float | None
    budget: float | None
    options: list[CostOption] = Field(description="Those that fit first, cheapest first.")


class SmokeRecord(BaseModel):
    """One smoke test's result as the suite printed it and grading completed it; tests add
    their own measurements beside these fields."""

    model_config = OPEN
    name: str
    status: str = Field(description="pass, warn, fail or skip.")
    reason: str | None = None
    value: Any = None
    expected: Any = None
    unit: str | None = None
    seconds: float | None = None
    env: str | None = None


class SmokeHost(BaseModel):
    model_config = STRICT
    host: str
    status: Literal["ok", "failed", "unreachable"]
    unreachable: str | None
    seconds: float
    counts: dict[str, int]
    results: list[SmokeRecord]


_CLASS_JSON[SmokeCheck] = SmokeRecord
_Change = model_of(PlannedChange)
PlanBody = _model(
    "PlanBody",
    "A host's plan (`HostPlan.to_json`).",
    host=(str, ...),
    refused=(str | None, ...),
    changes=(list[_Change], ...),  # type: ignore[valid-type]
    notes=(list[str], ...),
    versions_on_host=(list[str], ...),
    hooks=(
        dict[str, str],
        Field(default_factory=dict, description="The hooks this plan runs, rendered."),
    ),
)
PlanHost = _model(
    "PlanHost",
    "A host's plan, or why it has none (`error`).",
    status=(str, Field(description="ok, refused, or the host's state when it has no plan.")),
    error=(str | None, None),
    host=(str | None, None),
    refused=(str | None, None),
    changes=(list[_Change], []),  # type: ignore[valid-type]
    notes=(list[str], []),
    versions_on_host=(list[str], []),
    hooks=(
        dict[str, str],
        Field(default_factory=dict, description="The hooks this plan runs, rendered."),
    ),
)
_FIELD_JSON[(FactsGathered, "facts")] = HostFacts
_FIELD_JSON[(HostResult, "plans")] = list[PlanBody]  # type: ignore[valid-type]
_FIELD_JSON[(HostResult, "smoke")] = SmokeHost | None


class FactsHost(BaseModel):
    model_config = STRICT
    status: Literal["ok", "unreachable", "failed", "hostkey-changed"]
    seconds: float
    facts: HostFacts | None = None
    error: str | None = None


class EnvsHost(BaseModel):
    model_config = STRICT
    status: Literal["ok", "unreachable", "failed", "hostkey-changed"]
    seconds: float
    envs: list[EnvExport] | None = None
    error: str | None = None


class CheckProblem(BaseModel):
    model_config = STRICT
    where: str = Field(description="file:line:column, or --limit.")
    field: str
    message: str
    hosts: list[str] = Field(description="The hosts it applies to (none: the file itself).")
    file: str | None = Field(description="The file, as `where` names it; null for --limit.")
    line: int | None = Field(description="1-based; null when not known.")
    column: int | None = Field(description="1-based; null when not known.")
    key_path: list[str | int] = Field(
        description='The field as keys and list indices: ["stack", "cuda", "toolkits", 0].'
    )
    fix: str | None = Field(description="What to do, as the message ends; null if it names none.")


class DoctorHost(BaseModel):
    model_config = STRICT
    status: Literal["ok", "unreachable", "failed", "hostkey-changed"]
    health: Literal["healthy", "warning", "error"] | None = Field(
        description="The worst finding's severity, or healthy; null when the host was not read."
    )
    findings: list[model_of(Finding)]  # type: ignore[valid-type]
    error: str | None = None


def _camel(word: str) -> str:
    return "".join(w.capitalize() for w in word.split("-"))


class Setting(BaseModel):
    value: Any = Field(description="The value in effect.")
    source: str = Field(
        alias="from",
        description="Where it came from: command line, environment, a gpunode.toml, default.",
    )


def _output(kind: str, **fields: Any) -> type[BaseModel]:
    return _model(_camel(kind) + "Output", None, Envelope, **_envelope(kind), **fields)


def _events() -> Any:
    """`apply --json`'s lines: each event, then the recap, told apart by `event`."""
    models = []
    for event, word in EVENT_NAMES.items():
        cls: type = event
        model = model_of(cls, (("event", Literal[word]),))
        models.append(
            _model(_camel(word), _doc(cls), (model, Envelope), **_envelope("apply-event"))
        )
    recap = _model(
        "Recap",
        "The last line: each host's recap, the exit status, the run record's path.",
        Envelope,
        **_envelope("apply-event"),
        event=(Literal["recap"], ...),
        hosts=(list[model_of(HostRecap)], ...),  # type: ignore[misc]
        exit_code=(int, ...),
        record=(str, ...),
    )
    return Annotated[Union[tuple([*models, recap])], Field(discriminator="event")]  # noqa: UP007


_HostResult = model_of(HostResult, (("counts", dict[str, int]),))


@functools.cache
def output_type(kind: Kind) -> Any:
    """The type (a model, or the union of the events) of one output of `kind`."""
    if kind == "apply-event":
        return _events()
    payload: dict[str, dict[str, Any]] = {
        "hosts": {"hosts": (dict[str, Host], ...)},
        "check": {
            "inventory": (str, ...),
            "ok": (bool, ...),
            "hosts": (list[str], Field(description="The selected hosts' names.")),
            "groups": (int, ...),
            "problems": (list[CheckProblem], ...),
        },
        "facts": {"hosts": (dict[str, FactsHost], ...)},
        "envs": {"hosts": (dict[str, EnvsHost], ...)},
        "plan": {
            "hosts": (dict[str, PlanHost], ...),  # type: ignore[valid-type]
            "exit_code": (int, Field(description="The status plan exits with.")),
        },
        "report": {
            "id": (str, ...),
            "command": (str, ...),
            "inventory": (str, ...),
            "inventory_name": (
                str | None,
                Field(None, description="The inventory's `name:`, when it sets one."),
            ),
            "options": (dict[str, Any], ...),
            "started": (float, ...),
            "finished": (float | None, ...),
            "status": (Literal["running", "finished", "interrupted", "abandoned"], ...),
            "abandoned": (str | None, Field(None, description="Why a run is abandoned.")),
            "controller": (
                dict[str, Any] | None,
                Field(None, description="The controller: host, pid, pid_start, boot_id."),
            ),
            "exit_code": (int | None, ...),
            "seconds": (float | None, None),
            "hosts": (dict[str, _HostResult], ...),  # type: ignore[valid-type]
        },
        "smoke": {"hosts": (list[SmokeHost], ...), "exit_code": (int, ...)},
        "top-sample": {
            "host": (str, ...),
            "link": (LinkStatus, ...),
            "detail": (str, ...),
            "source": (str, ...),
            "ts": (float | None, Field(description="When the last sample was taken.")),
            "gpus": (list[TopGpu], ...),
            "processes": (list[model_of(GpuProcess)], ...),  # type: ignore[misc]
        },
        "lab-status": {
            "state_dir": (str, ...),
            "running": (bool, ...),
            "config": (dict[str, Any] | None, None),
            "hosts": (list[dict[str, Any]], ...),
        },
        "tags": {
            "roles": (
                dict[str, list[str]],
                Field(description="Each selected role and the tags its tasks offer."),
            ),
        },
        "cost": {
            "types": (list[CostType], ...),
            "unpriced": (list[dict[str, str]], Field(description="Hosts without a price.")),
            "work": (CostWork | None, Field(description="The job of --work, when given.")),
        },
        "doctor": {
            "hosts": (dict[str, DoctorHost], ...),
            "exit_code": (int, Field(description="The status doctor exits with.")),
        },
        "config": {
            "settings": (
                dict[str, Setting],
                Field(description="Each setting: its value and where it came from."),
            ),
        },
    }
    return _output(kind, **payload[kind])


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of `kind`'s output (of an inventory file for "inventory")."""
    if kind == "inventory":
        doc = Document.model_json_schema()
        title = "gpunode inventory"
    else:
        if kind not in KINDS:
            raise ValueError(f"no output {kind!r}: one of {', '.join(KINDS)}")
        doc = TypeAdapter(output_type(kind)).json_schema(mode="serialization")
        title = f"gpunode --json: {kind}"
    return {
        "$schema": JSON_SCHEMA,
        "title": title,
        **{k: v for k, v in doc.items() if k != "title"},
    }


def validate(kind: Kind, text: str) -> Any:
    """One output of `kind` (a document, or one line of a stream), checked by its model."""
    return TypeAdapter(output_type(kind)).validate_json(text)


def write_all(folder: Path) -> list[Path]:
    """Every schema as `folder/KIND.json` (and inventory.json)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in ("inventory", *KINDS):
        path = folder / f"{kind}.json"
        path.write_text(json.dumps(schema(kind), indent=2) + "\n")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    for path in write_all(Path(argv[0] if argv else "docs/schemas")):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
