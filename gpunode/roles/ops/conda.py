"""conda (installer to a prefix, envs with a Python) and pip inside a conda env."""

from __future__ import annotations

import posixpath
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from gpunode.changes import Change, Fetch, Packages, Step
from gpunode.roles.ops.base import (
    AbsPath,
    Args,
    Name,
    OpContext,
    Operation,
    Url,
    probe_key,
    q,
    shaped,
)
from gpunode.roles.ops.fetch import PRIVATE_DIR, pip_trusted, verified
from gpunode.roles.probe import Probe
from gpunode.versions import matches_prefix


def trusted_prefix(ctx: OpContext, prefix: str) -> None:
    """Refuse a prefix with a directory (itself or a parent) that is not root's alone: a
    user who can write there could plant PREFIX/bin/conda, which gpunode would run as root.
    The facts check every directory on the host (`unsafe`)."""
    found = ctx.facts.conda.unsafe.get(prefix)
    if not found:
        return
    uid, mode, directory = [*found.split(" ", 2), "?", "?", "?"][:3]
    fix = "choose a prefix whose every directory root owns and only root may write (/opt/conda)"
    if len(mode) < 4 or mode[0] not in "1357":  # not a sticky shared directory like /tmp
        fix += f", or make {directory} so: chown root:root and chmod go-w it"
    raise ValueError(
        f"conda prefix {prefix}: {directory} is not root's alone (owner uid {uid}, mode "
        f"{mode}), so a user could have planted {prefix}/bin/conda, which gpunode would run as "
        f"root: {fix}"
    )


class CondaArgs(Args):
    prefix: AbsPath = Field(description="Where conda lives, e.g. /opt/conda.")
    installer_url: Url = Field(
        description="The Miniforge/Miniconda installer's URL (https unless insecure_http)."
    )
    installer_sha256: str = Field(
        description="The installer's sha256 (64 hex digits). It runs as root: it must be this"
        " file (repos.conda_installer_sha256); planning refuses the task without it."
    )
    insecure_http: bool = Field(
        False, description="Allow a plain http download (labs only): repos.insecure_http."
    )


class Conda(Operation):
    """conda installed in a prefix from a pinned installer.

    The facts say where conda is; when it is not at `prefix`, one root step downloads the
    installer into a private directory, checks its sha256 and runs it in batch mode
    (`-b -u -p PREFIX`, completing a half-finished earlier install). A host with conda at
    `prefix` yields nothing.

    ```yaml
    - name: conda in /opt/conda
      op: conda
      prefix: /opt/conda
      installer_url: https://github.com/conda-forge/miniforge/releases/download/24.11.3-0/Miniforge3-Linux-x86_64.sh
      installer_sha256: "{{ repos.conda_installer_sha256 }}"
    ```
    """

    name = "conda"
    long_running = True
    args_model = CondaArgs

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: CondaArgs = args
        trusted_prefix(ctx, a.prefix)
        if ctx.facts.conda.prefix == a.prefix:
            return []
        sh = '"$d"/installer.sh'
        fetch = verified(a.installer_url, a.installer_sha256, sh, insecure_http=a.insecure_http)
        return [
            ctx.change(
                self,
                f"no conda at {a.prefix}",
                # one root step: a private directory, the verified installer, then run it
                # (-u: a half-finished earlier install is completed, not refused)
                [
                    Step(
                        f"{PRIVATE_DIR} && {fetch} && bash {sh} -b -u -p {q(a.prefix)}",
                        fetches=(Fetch(a.installer_url, a.installer_sha256),),
                    )
                ],
            )
        ]


# pip's and conda's words: a name or version never starts with `-` (an option to pip)
PyName = Annotated[
    str, AfterValidator(shaped(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", "a PyPI name"))
]
PyVersion = Annotated[
    str, AfterValidator(shaped(r"[0-9][A-Za-z0-9.+!*_-]*", "a Python package version"))
]


Channel = Annotated[
    str, AfterValidator(shaped(r"[A-Za-z0-9][A-Za-z0-9_.:/+-]*", "a conda channel or its URL"))
]


class CondaEnvArgs(Args):
    prefix: AbsPath = Field(description="conda's prefix; the env is made in PREFIX/envs/ENV.")
    env: Name = Field(description="The env's name.")
    python: PyVersion = Field(
        description='The Python version wanted; a prefix ("3.11") matches any 3.11.x.'
    )
    channels: list[Channel] = Field(
        [],
        description="The only channels to use (`--override-channels -c ...`); empty: conda's.",
    )


class CondaEnv(Operation):
    """A conda env with a Python of the version wanted.

    The facts list the envs and their Python. A missing env is created (`conda create -p
    PREFIX/envs/ENV python=VERSION`); one whose Python does not match the version (a
    prefix: "3.11" accepts 3.11.9) gets it installed; one that matches yields nothing.

    ```yaml
    - name: conda env torch (Python 3.11)
      op: conda_env
      prefix: /opt/conda
      env: torch
      python: "3.11"
    ```
    """

    name = "conda_env"
    long_running = True
    args_model = CondaEnvArgs

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: CondaEnvArgs = args
        trusted_prefix(ctx, a.prefix)
        env = next((e for e in ctx.facts.conda.envs if e.name == a.env), None)
        path = f"{a.prefix}/envs/{a.env}"
        conda = f"{a.prefix}/bin/conda"
        channels = "".join(f" -c {q(c)}" for c in a.channels)
        override = f" --override-channels{channels}" if a.channels else ""
        spec = "python=" + a.python
        takes = (Packages("conda", path, (spec,), channels=tuple(a.channels)),)
        if env is None:
            why, verb = f"conda env {a.env} missing", "create"
        elif env.python is None or not matches_prefix(env.python, a.python):
            why, verb = f"conda env {a.env} has Python {env.python}, {a.python} wanted", "install"
        else:
            return []
        step = Step(f"{q(conda)} {verb} -y -q -p {q(path)}{override} {q(spec)}", packages=takes)
        return [ctx.change(self, why, [step])]


Extras = Annotated[str, AfterValidator(shaped(r"[A-Za-z0-9._,-]+", "pip extras"))]
LocalLabel = Annotated[str, AfterValidator(shaped(r"[A-Za-z0-9.]+", "a local label"))]


class PipPackage(Args):
    """One Python package at an exact version."""

    name: PyName = Field(description="The PyPI name, e.g. torch.")
    version: PyVersion = Field(description="The exact version, installed as `name==version`.")
    extras: Extras | None = Field(None, description="Extras, e.g. and-cuda: `name[extras]`.")
    local: LocalLabel | None = Field(
        None, description="Local version label the wheel must carry, e.g. cu124 for 2.4.1+cu124."
    )


class PipArgs(Args):
    python: AbsPath = Field(
        description="The env's interpreter, e.g. /opt/conda/envs/torch/bin/python."
    )
    packages: list[PipPackage] = Field(description="The packages, each {name, version, ...}.")
    index_url: Url | None = Field(None, description="pip's --index-url (a wheel index).")
    extra_index_url: Url | None = Field(None, description="pip's --extra-index-url.")
    insecure_http: bool = Field(
        False, description="Trust plain-http indexes (a mirror; labs): repos.insecure_http."
    )


_CHECK = (
    "import importlib.metadata as m, sys\n"
    "try: v = m.version(sys.argv[1])\n"
    "except m.PackageNotFoundError: sys.exit(1)\n"
    "sys.exit(0 if v in sys.argv[2:] else 1)"
)


class Pip(Operation):
    """Python packages at exact versions (and local labels) in a conda env, through the
    env's own pip.

    A probe per package asks the env's Python which version is installed
    (importlib.metadata). Those that are missing or at another version (or without the
    local label wanted) are installed in one `python -m pip install name==version ...`;
    when every package matches nothing is yielded.

    ```yaml
    - name: PyTorch 2.4.1 in torch
      op: pip
      python: /opt/conda/envs/torch/bin/python
      packages:
        - {name: torch, version: 2.4.1, local: cu124}
      index_url: https://download.pytorch.org/whl/cu124
    ```
    """

    name = "pip"
    long_running = True
    args_model = PipArgs

    @staticmethod
    def _probe(a: PipArgs, p: PipPackage) -> Probe:
        accepted = [f"{p.version}+{p.local}"] if p.local else [p.version]
        cmd = " ".join(q(x) for x in [a.python, "-c", _CHECK, p.name, *accepted])
        return Probe(probe_key("pip", a.python, p.name, *accepted), f"{cmd} 2>/dev/null")

    def probes(self, args: Any) -> list[Probe]:
        a: PipArgs = args
        return [self._probe(a, p) for p in a.packages]

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: PipArgs = args
        todo = [p for p in a.packages if not ctx.probe(self._probe(a, p))]
        if not todo:
            return []
        specs = [f"{p.name}{f'[{p.extras}]' if p.extras else ''}=={p.version}" for p in todo]
        cmd = [q(a.python), "-m", "pip", "install", "-q", "--no-input"]
        if a.index_url:
            cmd += ["--index-url", q(a.index_url)]
        if a.extra_index_url:
            cmd += ["--extra-index-url", q(a.extra_index_url)]
        for host in pip_trusted([a.index_url, a.extra_index_url], insecure_http=a.insecure_http):
            cmd += ["--trusted-host", q(host)]
        cmd += [q(s) for s in specs]
        wanted = ", ".join(f"{p.name} {p.version}{'+' + p.local if p.local else ''}" for p in todo)
        env = posixpath.dirname(posixpath.dirname(a.python))  # PREFIX/envs/ENV/bin/python
        takes = Packages("pip", env, tuple(specs), a.index_url, a.extra_index_url)
        step = Step(" ".join(cmd), packages=(takes,))
        return [ctx.change(self, f"{wanted} not installed", [step])]
