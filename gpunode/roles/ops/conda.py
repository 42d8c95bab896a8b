"""conda (installer to a prefix, envs with a Python) and pip inside a conda env."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator

from gpunode.changes import Change
from gpunode.roles.ops.base import (
    AbsPath,
    Args,
    Name,
    OpContext,
    Operation,
    Probe,
    Url,
    probe_key,
    q,
    shaped,
)
from gpunode.roles.ops.fetch import PRIVATE_DIR, verified
from gpunode.versions import matches_prefix


class CondaArgs(Args):
    prefix: str
    installer_url: str
    installer_sha256: str
    """The installer runs as root: it must be this file (repos.conda_installer_sha256)."""
    insecure_http: bool = False


class Conda(Operation):
    name = "conda"
    long_running = True
    args_model = CondaArgs

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: CondaArgs = args
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
                [f"{PRIVATE_DIR} && {fetch} && bash {sh} -b -u -p {q(a.prefix)}"],
            )
        ]


# pip's and conda's words: a name or version never starts with `-` (an option to pip)
PyName = Annotated[
    str, AfterValidator(shaped(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", "a PyPI name"))
]
PyVersion = Annotated[
    str, AfterValidator(shaped(r"[0-9][A-Za-z0-9.+!*_-]*", "a Python package version"))
]


class CondaEnvArgs(Args):
    prefix: AbsPath
    env: Name
    python: PyVersion


class CondaEnv(Operation):
    name = "conda_env"
    long_running = True
    args_model = CondaEnvArgs

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: CondaEnvArgs = args
        env = next((e for e in ctx.facts.conda.envs if e.name == a.env), None)
        path = f"{a.prefix}/envs/{a.env}"
        conda = f"{a.prefix}/bin/conda"
        if env is None:
            return [
                ctx.change(
                    self,
                    f"conda env {a.env} missing",
                    [f"{q(conda)} create -y -q -p {q(path)} {q('python=' + a.python)}"],
                )
            ]
        if env.python is None or not matches_prefix(env.python, a.python):
            return [
                ctx.change(
                    self,
                    f"conda env {a.env} has Python {env.python}, {a.python} wanted",
                    [f"{q(conda)} install -y -q -p {q(path)} {q('python=' + a.python)}"],
                )
            ]
        return []


class PipPackage(Args):
    name: PyName
    version: PyVersion
    extras: Annotated[str, AfterValidator(shaped(r"[A-Za-z0-9._,-]+", "pip extras"))] | None = None
    local: Annotated[str, AfterValidator(shaped(r"[A-Za-z0-9.]+", "a local label"))] | None = None
    """Local version label the wheel must carry, e.g. cu124 for 2.4.1+cu124."""


class PipArgs(Args):
    python: AbsPath
    """The env's interpreter, e.g. /opt/conda/envs/torch/bin/python."""
    packages: list[PipPackage]
    index_url: Url | None = None
    extra_index_url: Url | None = None


_CHECK = (
    "import importlib.metadata as m, sys\n"
    "try: v = m.version(sys.argv[1])\n"
    "except m.PackageNotFoundError: sys.exit(1)\n"
    "sys.exit(0 if v in sys.argv[2:] else 1)"
)


class Pip(Operation):
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
        cmd += [q(s) for s in specs]
        wanted = ", ".join(f"{p.name} {p.version}{'+' + p.local if p.local else ''}" for p in todo)
        return [ctx.change(self, f"{wanted} not installed", [" ".join(cmd)])]
