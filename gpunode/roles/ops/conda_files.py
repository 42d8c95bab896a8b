"""An env declared by a file: environment.yml (conda env update) or requirements.txt (pip)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from gpunode.changes import Change, Packages, Step
from gpunode.inventory.specfiles import environment, requirements
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
from gpunode.roles.ops.conda import trusted_prefix
from gpunode.roles.ops.fetch import pip_trusted
from gpunode.roles.probe import Probe

Sha256 = Annotated[str, AfterValidator(shaped(r"[0-9a-f]{64}", "a sha256 (64 hex digits)"))]


class CondaEnvFileArgs(Args):
    prefix: AbsPath = Field(description="conda's prefix; the env is PREFIX/envs/ENV.")
    env: Name = Field(description="The env's name.")
    kind: Literal["environment", "requirements"] = Field(
        description="environment: an environment.yml for `conda env update -f`;"
        " requirements: a requirements.txt for `pip install -r`."
    )
    file: AbsPath = Field(description="The file on the host (written by a `file` task).")
    sha256: Sha256 = Field(description="The file's sha256: what the env was last updated from.")
    index_url: Url | None = Field(None, description="pip's index (PIP_INDEX_URL for conda).")
    insecure_http: bool = Field(
        False, description="Trust a plain-http index (a mirror; labs): repos.insecure_http."
    )
    content: str | None = Field(
        None,
        description="The file's text, read for what it installs (`gpunode mirror`, plan's"
        " mirror check); none: not read.",
    )
    source: str = Field(
        "", description="Where the file comes from, for messages: the inventory's envs/torch.yml."
    )


class CondaEnvFile(Operation):
    """A conda env updated from its environment.yml or requirements.txt whenever the
    file's content changes.

    The env records the sha256 of the file it was last updated from in
    PREFIX/envs/ENV/conda-meta/gpunode-KIND.sha256 (a record that goes with the env: an env
    made again is updated again). A probe compares it with `sha256`; when it differs or is
    missing, one step runs `conda env update -p ENV -f FILE` (environment) or the env's
    `python -m pip install -r FILE` (requirements), and writes the record only after it
    succeeded. The same content yields nothing.

    ```yaml
    - name: torch from its environment.yml
      op: conda_env_file
      prefix: /opt/conda
      env: torch
      kind: environment
      file: /var/lib/gpunode/conda/torch/environment.yml
      sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    ```
    """

    name = "conda_env_file"
    long_running = True
    args_model = CondaEnvFileArgs

    @staticmethod
    def record(a: CondaEnvFileArgs) -> str:
        return f"{a.prefix}/envs/{a.env}/conda-meta/gpunode-{a.kind}.sha256"

    def _probe(self, a: CondaEnvFileArgs) -> Probe:
        cmd = f"grep -qsx {q(a.sha256)} {q(self.record(a))}"
        return Probe(probe_key("conda_env_file", a.prefix, a.env, a.kind, a.sha256), cmd)

    def probes(self, args: Any) -> list[Probe]:
        return [self._probe(args)]

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: CondaEnvFileArgs = args
        trusted_prefix(ctx, a.prefix)
        if ctx.probe(self._probe(a)):
            return []
        path = f"{a.prefix}/envs/{a.env}"
        trusted = pip_trusted([a.index_url], insecure_http=a.insecure_http)
        if a.kind == "environment":
            pip_index = f"PIP_INDEX_URL={q(a.index_url)} " if a.index_url else ""
            pip_index += f"PIP_TRUSTED_HOST={q(' '.join(trusted))} " if trusted else ""
            conda = q(f"{a.prefix}/bin/conda")
            update = f"{pip_index}{conda} env update -q -p {q(path)} -f {q(a.file)}"
        else:
            index = f" --index-url {q(a.index_url)}" if a.index_url else ""
            index += "".join(f" --trusted-host {q(h)}" for h in trusted)
            python = q(f"{path}/bin/python")
            update = f"{python} -m pip install -q --no-input{index} -r {q(a.file)}"
        write = f"printf '%s\\n' {q(a.sha256)} > {q(self.record(a))}"
        return [
            ctx.change(
                self,
                f"{a.file} (sha256 {a.sha256[:12]}) not yet applied to conda env {a.env}",
                [Step(f"{update} && {write}", packages=self._packages(a, path))],
            )
        ]

    @staticmethod
    def _packages(a: CondaEnvFileArgs, env: str) -> tuple[Packages, ...]:
        if a.content is None:
            return ()
        where = a.source or a.file
        if a.kind == "environment":
            return environment(a.content, where, env=env, index_url=a.index_url)
        return (requirements(a.content, where, env=env, index_url=a.index_url),)
