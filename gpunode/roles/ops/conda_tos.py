"""Anaconda's Terms of Service accepted for channels, as conda-anaconda-tos records it."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import Field

from gpunode.changes import Change
from gpunode.roles.ops.base import AbsPath, Args, OpContext, Operation, Url, probe_key, q
from gpunode.roles.ops.conda import trusted_prefix
from gpunode.roles.probe import Probe


def tos_dir(prefix: str, url: str) -> str:
    """Where `conda tos accept --system` records a channel: PREFIX/conda-meta/tos/HASH, HASH
    the sha256 of the channel's location and name (conda-anaconda-tos path.hash_channel:
    repo.anaconda.com + pkgs/main)."""
    location, _, name = url.split("://", 1)[-1].rstrip("/").partition("/")
    digest = hashlib.sha256(location.encode() + name.encode()).hexdigest()
    return f"{prefix}/conda-meta/tos/{digest}"


class CondaTosArgs(Args):
    prefix: AbsPath = Field(description="conda's prefix (its base env).")
    channels: list[Url] = Field(
        description="The channels' URLs, e.g. https://repo.anaconda.com/pkgs/main."
    )


class CondaTos(Operation):
    """Anaconda's Terms of Service accepted for channels, recorded in conda's base env.

    conda >= 25.5 (its conda-anaconda-tos plugin) stops a non-interactive `create` or
    `install` with CondaToSNonInteractiveError while a channel's ToS is not accepted. A
    probe per channel looks for an accepted record under PREFIX/conda-meta/tos/ (where
    `--system` writes); the channels without one are accepted in one `conda tos accept
    --override-channels --channel URL ... --system`. The inventory asks for this with
    `conda.tos: accept`; no channels yields nothing.

    ```yaml
    - name: Anaconda's Terms of Service
      op: conda_tos
      prefix: /opt/conda
      channels: [https://repo.anaconda.com/pkgs/main, https://repo.anaconda.com/pkgs/r]
    ```
    """

    name = "conda_tos"
    args_model = CondaTosArgs

    @staticmethod
    def _probe(a: CondaTosArgs, url: str) -> Probe:
        pattern = '"tos_accepted": *true'
        cmd = f"grep -qsE {q(pattern)} {q(tos_dir(a.prefix, url))}/*.json"
        return Probe(probe_key("conda_tos", a.prefix, url), cmd)

    def probes(self, args: Any) -> list[Probe]:
        a: CondaTosArgs = args
        return [self._probe(a, url) for url in a.channels]

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: CondaTosArgs = args
        trusted_prefix(ctx, a.prefix)
        todo = [url for url in a.channels if not ctx.probe(self._probe(a, url))]
        if not todo:
            return []
        cmd = [q(f"{a.prefix}/bin/conda"), "tos", "accept", "--override-channels"]
        for url in todo:
            cmd += ["--channel", q(url)]
        cmd.append("--system")
        return [
            ctx.change(
                self,
                f"accept Anaconda's Terms of Service for channels {', '.join(todo)}: "
                "conda.tos: accept in the inventory",
                [" ".join(cmd)],
            )
        ]
