"""Every `--json` output: in its envelope, as its published schema says, readable by the
script docs/json.md shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpunode import events
from gpunode.exitcodes import ExitCode
from gpunode.views.envelope import KINDS, STREAMS, envelope
from gpunode.views.schemas import schema, validate
from tests.conftest import EXAMPLE_INVENTORY as EXAMPLE

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "json.md"
PUBLISHED = ROOT / "docs" / "schemas"
FAKE_SMI = ROOT / "tests" / "fixtures" / "monitor"
REGENERATE = "python -m gpunode.views.schemas docs/schemas"


def _all_events(cls: type = events.Event) -> set[type]:
    subs = set(cls.__subclasses__())
    return subs.union(*(_all_events(s) for s in subs))


def test_every_event_and_kind_has_a_documented_word() -> None:
    doc = DOC.read_text()
    assert _all_events() == set(events.EVENT_NAMES), "an event class without a word"
    words = list(events.EVENT_NAMES.values())
    assert len(set(words)) == len(words)
    for cls, word in events.EVENT_NAMES.items():
        assert re.fullmatch(r"[a-z]+(-[a-z]+)+", word), word
        assert f"| `{word}` | `{cls.__name__}` |" in doc, f"{word} is not in docs/json.md"
    for kind in KINDS:
        assert f"| `{kind}` |" in doc and f"### `{kind}`" in doc, f"{kind} not documented"


def test_the_envelope_keeps_its_own_keys() -> None:
    assert envelope("facts", {"hosts": {}})["kind"] == "facts"
    with pytest.raises(ValueError, match="kind"):
        envelope("facts", {"kind": "plan"})


@pytest.mark.parametrize("kind", ["inventory", *KINDS])
def test_published_schema_is_the_codes(kind: str) -> None:
    path = PUBLISHED / f"{kind}.json"
    assert path.is_file(), f"{path} is missing: run `{REGENERATE}`"
    assert json.loads(path.read_text()) == schema(kind), (
        f"{path} differs from the schema the code makes: run `{REGENERATE}` and commit it "
        "(a change that breaks scripts raises envelope.SCHEMA)"
    )


def test_no_schema_is_published_for_an_output_that_is_not() -> None:
    assert {p.stem for p in PUBLISHED.glob("*.json")} == {"inventory", *KINDS}


def gpunode(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpunode", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_schema_command_prints_the_published_schemas() -> None:
    for kind in ("plan", "apply-event"):
        out = gpunode("schema", "--output", kind)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == json.loads((PUBLISHED / f"{kind}.json").read_text())
    default = gpunode("schema")
    assert json.loads(default.stdout)["title"] == "gpunode inventory"
    both = gpunode("schema", "--output", "plan", "--inventory")
    assert both.returncode == ExitCode.USAGE and "pick one" in both.stderr
    assert gpunode("schema", "--output", "nosuch").returncode == ExitCode.USAGE  # click's


# -- real outputs ------------------------------------------------------------------------------


def documented_script() -> str:
    text = DOC.read_text()
    match = re.search(r"<!-- script -->\n```python\n(.*?)```", text, re.S)
    assert match, "docs/json.md lost its script"
    return match.group(1)


@dataclass
class Output:
    kind: str
    run: subprocess.CompletedProcess[str]

    def read_by_script(self) -> list[str]:
        """What the script of docs/json.md prints reading this output."""
        out = subprocess.run(
            [sys.executable, "-c", documented_script()],
            input=self.run.stdout,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Output]]:
    """One run of each command with --json, against this machine (a local host, with the
    nvidia-smi stand-in) and an address nothing listens on."""
    tmp = tmp_path_factory.mktemp("json")
    env = {
        **os.environ,
        "GPUNODE_STATE_DIR": str(tmp / "state"),
        "PATH": f"{FAKE_SMI}{os.pathsep}{os.environ['PATH']}",
    }
    local = tmp / "local.yaml"
    local.write_text("hosts:\n  me: {connection: local, become: none}\n")
    gone = tmp / "gone.yaml"
    gone.write_text(
        "hosts:\n  gone:\n    address: 127.0.0.1\n"
        "    ssh: {port: 1, connect_timeout: 3, identity_file: null, config_file: null}\n"
    )
    priced = tmp / "priced.yaml"
    priced.write_text(
        "hosts:\n  me: {connection: local, become: none,\n"
        "       gpus: {model: H200, count: 2, hourly_cost: {amount: 3.5}}}\n"
    )
    bad = tmp / "bad.yaml"
    bad.write_text("hosts:\n  a: {address: 192.0.2.1, colour: red}\n")
    runs = {
        "hosts": ("hosts", "hosts", EXAMPLE, "--json"),
        "check": ("check", "check", EXAMPLE, "--json"),
        "check-bad": ("check", "check", str(bad), "--json"),
        "facts": ("facts", "facts", str(local), "--json"),
        "plan": ("plan", "plan", str(local), "--json"),
        "apply": ("apply-event", "apply", str(local), "--check", "--no-smoke", "--json"),
        "report": ("report", "report", "--json"),  # the apply just before
        "smoke": ("smoke", "smoke", str(local), "--only", "nvidia-smi", "--json"),
        "cost": ("cost", "cost", str(priced), "--work", "100", "--json"),
        "top": ("top-sample", "top", str(local), "--once", "--json"),
        "top-gone": ("top-sample", "top", str(gone), "--once", "--json"),
    }
    yield {name: Output(kind, gpunode(*args, env=env)) for name, (kind, *args) in runs.items()}


def _docs(out: Output) -> list[str]:
    """The output's envelopes, as text: the document, or each line of a stream."""
    text = out.run.stdout
    return text.splitlines() if out.kind in STREAMS else [text]


@pytest.mark.parametrize(
    "name",
    [
        "hosts",
        "check",
        "check-bad",
        "facts",
        "plan",
        "apply",
        "report",
        "smoke",
        "cost",
        "top",
        "top-gone",
    ],
)
def test_output_is_an_envelope_its_schema_validates(outputs: dict[str, Output], name: str) -> None:
    out = outputs[name]
    texts = _docs(out)
    assert texts and all(texts), out.run.stdout + out.run.stderr
    for text in texts:
        doc = json.loads(text)
        assert (doc["kind"], doc["schema"]) == (out.kind, 1), text[:300]
        validate(out.kind, text)  # raises, naming the field, when it does not


def test_the_documented_script_reads_every_output(outputs: dict[str, Output]) -> None:
    read = {name: out.read_by_script() for name, out in outputs.items()}
    assert read["hosts"] == ["hosts gpu-a100-01 -", "hosts gpu-a100-02 -", "hosts gpu-h100-01 -"]
    assert read["check"] == ["check ok"] and outputs["check"].run.returncode == ExitCode.OK
    assert read["check-bad"] == ["check 1 problems"]
    assert outputs["check-bad"].run.returncode == ExitCode.BAD_INPUT
    assert read["facts"] == ["facts me ok"]
    (planned,) = read["plan"]
    assert planned in ("plan me ok", "plan me refused"), planned
    apply = outputs["apply"].run
    finished = [line for line in read["apply"] if line.startswith("apply-event me ")]
    assert len(finished) == 1 and read["apply"][-1] == f"recap {apply.returncode}"
    status = finished[0].rsplit(" ", 1)[1]
    assert read["report"] == [f"report me {status}"]  # the record of that run
    assert read["smoke"][0].startswith("smoke me ")
    assert read["cost"] == ["cost H200 None"]  # nvidia-smi alone measures no TFLOP/s
    assert read["top"] == ["top-sample me live 2"], outputs["top"].run.stderr
    assert outputs["top"].run.returncode == ExitCode.OK
    assert read["top-gone"] == ["top-sample gone down 0"]
    assert outputs["top-gone"].run.returncode == ExitCode.UNREACHABLE


def test_top_json_needs_once(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  me: {connection: local}\n")
    out = gpunode("top", str(inv), "--json")
    assert out.returncode == ExitCode.USAGE and "--json needs --once" in out.stderr
