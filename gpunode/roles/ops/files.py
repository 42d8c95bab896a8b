"""file, template, line_in_file and module_blacklist: content compared by sha256 from facts."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

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
    attrs_fix,
    file_hash,
    probe_key,
    q,
    sha256,
)
from gpunode.roles.probe import Probe


class FileArgs(Args):
    path: FilePath = Field(description="The file's absolute path (not a directory's).")
    content: str = Field("", description="The whole content wanted (sent on stdin, never argv).")
    mode: Mode = Field("0644", description="Octal mode.")
    owner: Owner = Field("root:root", description="`user[:group]`, by name or number.")
    state: str = Field(
        "present", description="`present`, or `absent` to remove the file (anything else fails)."
    )


class File(Operation):
    """A file with exactly this content, mode and owner, or no file (`state: absent`).

    The facts carry the sha256, mode and owner of every path a task manages. A file whose
    content differs, or that is missing (or unreadable to the SSH user), is written whole:
    into a new private file beside it, given its owner and mode, renamed over it. A file
    with the right content keeps it, and only a differing mode or owner is corrected
    (`chmod`, `chown`). With `state: absent` a present file is removed. A file that is
    already as wanted yields nothing.

    ```yaml
    - name: swappiness
      op: file
      path: /etc/sysctl.d/90-gpunode.conf
      content: "vm.swappiness = 10\\n"
      mode: "0644"
      owner: root:root
    ```
    """

    name = "file"
    args_model: ClassVar[type[Args]] = FileArgs
    path_args = ("path",)

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
    # the facts run without sudo and apply hashes such a file as root: still unreadable
    # here (plan, --check), it is shown as one apply may write again to be sure
    return f"{path} unreadable to the SSH user (mode {int(attrs.mode, 8):04o} {attrs.owner})"


class TemplateArgs(FileArgs):
    src: str = Field(
        description="A Jinja template under the role's templates/ folder; the role's variables"
        " and facts render it into `content` (which the task does not give)."
    )


class Template(File):
    """A file rendered from a Jinja template in the role's templates/ folder: as `file`,
    with the rendered text as its content.

    Written only when the rendered text's sha256 differs from the file's (or the file is
    missing); a file with that content only has its mode and owner corrected, and one that
    is as wanted yields nothing (nor do its `on_change` commands run, ldconfig below).

    ```yaml
    - name: CUDA libraries for the dynamic linker
      op: template
      src: gpunode-cuda.conf.j2
      path: /etc/ld.so.conf.d/gpunode-cuda.conf
      mode: "0644"
      on_change: [ldconfig]
    ```
    """

    name = "template"
    renders_template = True
    args_model = TemplateArgs


class LineInFileArgs(Args):
    path: FilePath = Field(description="The file; it and its directory are made when missing.")
    line: Line = Field(
        description="The whole line, without its newline. One line only: a newline in it would"
        " add lines the check never finds (and a config file would read as more settings"
        " than the task shows)."
    )


class LineInFile(Operation):
    """A line present, whole, in a file: appended when missing, other lines untouched.

    Whether the line is there is a probe (`grep -qxF`, the exact whole line), batched with
    the others in one round trip. A missing line is appended (on stdin), after a newline
    if the file's last line lacks one, making the file and its directory when absent. A
    file that already holds the line yields nothing. It never changes a file's mode or owner
    (a new file gets the umask's mode): use `file` to own a whole file.

    ```yaml
    - name: nvidia modules load at boot
      op: line_in_file
      path: /etc/modules-load.d/gpunode.conf
      line: nvidia-uvm
    ```
    """

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
    module: ModuleName = Field(
        description="The kernel module. Written into a modprobe.d line and the default file"
        " name: [A-Za-z0-9_-] only."
    )
    path: FilePath | None = Field(
        None, description="The modprobe.d file; /etc/modprobe.d/gpunode-blacklist-MODULE.conf."
    )


class ModuleBlacklist(Operation):
    """A kernel module blacklisted in its own modprobe.d file, with the initramfs rebuilt so
    early boot honours it (`nouveau` also gets `options nouveau modeset=0`).

    The file is written, and `update-initramfs -u` run, only when its sha256 differs from
    the content wanted (or it is missing); a failed rebuild removes the file again, so the
    next run retries both, and a rebuild cut off (the controller killed, the connection
    lost) is run again, with the file, by the next apply (the host's step journal). The
    change asks for a reboot when the module is nouveau and the
    facts say it is loaded (it loads from the initramfs, so only the rebuilt one keeps it
    out). A file with that content only has its mode and
    owner (0644 root:root) corrected, and one that is as wanted yields nothing.

    ```yaml
    - name: blacklist nouveau
      op: module_blacklist
      module: nouveau
    ```
    """

    name = "module_blacklist"
    args_model = ModuleBlacklistArgs
    path_args = ("module", "path")

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
                    # a failed rebuild takes the file away again: else the next run would
                    # find it written and never rebuild, and nouveau would still load
                    "if command -v update-initramfs >/dev/null 2>&1; then update-initramfs -u"
                    f" || {{ rm -f -- {q(path)}; echo 'update-initramfs failed: the blacklist"
                    " file is removed, so that the next run writes it and rebuilds' >&2; false; };"
                    " else echo 'update-initramfs not found: initramfs not rebuilt' >&2; fi",
                ],
                reboot=loaded,
                path=path,
                after=content,
            )
        ]
