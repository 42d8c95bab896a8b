"""file, template, line_in_file and module_blacklist: content compared by sha256 from facts."""

from __future__ import annotations

from typing import Any, ClassVar

from gpunode.changes import Change, Step
from gpunode.roles.ops.apt import write_file_step
from gpunode.roles.ops.base import (
    Args,
    FilePath,
    Line,
    Mode,
    ModuleName,
    OpContext,
    Operation,
    Owner,
    Probe,
    attrs_fix,
    file_hash,
    probe_key,
    q,
    sha256,
)


class FileArgs(Args):
    path: FilePath
    content: str = ""
    mode: Mode = "0644"
    owner: Owner = "root:root"
    state: str = "present"  # present | absent


class File(Operation):
    """Whole-file content, mode and owner; a file with the right content keeps it, and only
    its mode or owner is corrected."""

    name = "file"
    args_model: ClassVar[type[Args]] = FileArgs

    def paths(self, args: Any) -> list[str]:
        a: FileArgs = args
        return [a.path]

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: FileArgs = args
        have = file_hash(ctx.facts, a.path)
        if a.state == "absent":
            if have is None:
                return []
            return [ctx.change(self, f"{a.path} present", [f"rm -f {q(a.path)}"], path=a.path)]
        if a.state != "present":
            raise ValueError(f"state must be present or absent, not {a.state!r}")
        if have == sha256(a.content):
            why, cmds = attrs_fix(ctx.facts, a.path, a.mode, a.owner)
            return [ctx.change(self, why, cmds, path=a.path)] if cmds else []
        reason = _why_write(ctx, a.path, have)
        return [
            ctx.change(
                self,
                reason,
                [write_file_step(a.path, a.content, a.mode, a.owner)],
                path=a.path,
                after=a.content,
            )
        ]


def _why_write(ctx: OpContext, path: str, have: str | None) -> str:
    if have is not None:
        return f"{path} content differs"
    attrs = ctx.facts.file_attrs.get(path)
    if attrs is None:
        return f"{path} missing"
    # the facts run without sudo: a file only root may read is written again to be sure
    return f"{path} unreadable to the SSH user (mode {int(attrs.mode, 8):04o} {attrs.owner})"


class TemplateArgs(FileArgs):
    src: str
    """Template under the role's templates/; the engine renders it into `content`."""


class Template(File):
    name = "template"
    renders_template = True
    args_model = TemplateArgs


class LineInFileArgs(Args):
    path: FilePath
    line: Line
    """One line: a newline in it would add lines the probe never finds (and a config file
    would read as more settings than the task shows)."""
    mode: Mode = "0644"


class LineInFile(Operation):
    name = "line_in_file"
    args_model = LineInFileArgs

    def _probe(self, a: LineInFileArgs) -> Probe:
        return Probe(
            probe_key("line", a.path, a.line), f"grep -qxF -- {q(a.line)} {q(a.path)} 2>/dev/null"
        )

    def probes(self, args: Any) -> list[Probe]:
        return [self._probe(args)]

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: LineInFileArgs = args
        if ctx.probe(self._probe(a)):
            return []
        directory = a.path.rsplit("/", 1)[0] or "/"
        cmd = (
            f"mkdir -p {q(directory)} && touch {q(a.path)}"
            # a file without a final newline must not swallow the new line into its last one
            f' && {{ [ ! -s {q(a.path)} ] || [ -z "$(tail -c1 {q(a.path)})" ]'
            f" || echo >> {q(a.path)}; }} && cat >> {q(a.path)}"
        )
        return [
            ctx.change(
                self,
                f"line {a.line!r} missing from {a.path}",
                [Step(cmd, a.line + "\n")],
                path=a.path,
            )
        ]


class ModuleBlacklistArgs(Args):
    module: ModuleName
    """Written into a modprobe.d line and the default file name: [A-Za-z0-9_-] only."""
    path: FilePath | None = None


class ModuleBlacklist(Operation):
    """Blacklist a kernel module; rebuild the initramfs so early boot honours it."""

    name = "module_blacklist"
    args_model = ModuleBlacklistArgs

    @staticmethod
    def _path(a: ModuleBlacklistArgs) -> str:
        return a.path or f"/etc/modprobe.d/gpunode-blacklist-{a.module}.conf"

    @staticmethod
    def _content(a: ModuleBlacklistArgs) -> str:
        text = f"# managed by gpunode\nblacklist {a.module}\n"
        if a.module == "nouveau":
            text += "options nouveau modeset=0\n"
        return text

    def paths(self, args: Any) -> list[str]:
        return [self._path(args)]

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: ModuleBlacklistArgs = args
        path, content = self._path(a), self._content(a)
        if file_hash(ctx.facts, path) == sha256(content):
            why, cmds = attrs_fix(ctx.facts, path, "0644", "root:root")
            return [ctx.change(self, why, cmds, path=path)] if cmds else []
        loaded = a.module == "nouveau" and ctx.facts.module.nouveau_loaded
        return [
            ctx.change(
                self,
                f"{a.module} not blacklisted" + (" and loaded: reboot needed" if loaded else ""),
                [
                    write_file_step(path, content, "0644"),
                    "if command -v update-initramfs >/dev/null 2>&1; then update-initramfs -u;"
                    " else echo 'update-initramfs not found: initramfs not rebuilt' >&2; fi",
                ],
                reboot=loaded,
                path=path,
                after=content,
            )
        ]
