"""kernel_headers and dkms_built: a DKMS module built for the kernels a host runs and boots."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field

from gpunode.changes import LOG_TAIL, Change
from gpunode.roles.ops.apt import apt_get
from gpunode.roles.ops.base import (
    Args,
    DebVersion,
    ModuleName,
    OpContext,
    Operation,
    q,
    shaped,
)

KernelRelease = Annotated[
    str,
    AfterValidator(
        shaped(r"[0-9][A-Za-z0-9.+_~-]*", "a kernel release (uname -r: 6.8.0-45-generic)")
    ),
]
MAKE_LOG_LINES = 20


class KernelHeadersArgs(Args):
    kernels: list[KernelRelease] = Field(
        description="Kernel releases (`uname -r`) that need headers: the running kernel and"
        " the one the next boot loads."
    )


class KernelHeaders(Operation):
    """`linux-headers-<kernel>` installed for each kernel, so that DKMS can build modules.

    Ubuntu's `dkms` only recommends the headers, and packages installed without
    recommends leave a driver whose module never builds. A kernel whose headers the facts
    show (`/usr/src/linux-headers-<k>` or `/lib/modules/<k>/build`) needs nothing; for the
    others one change installs those the host's apt offers (the kernel's own version, no
    pin) and says on stderr which it does not offer: DKMS then fails for that kernel, and
    `dkms_built` stops the host with the build's log before any reboot.

    ```yaml
    - name: kernel headers
      op: kernel_headers
      kernels: [6.8.0-45-generic, 6.8.0-87-generic]
    ```
    """

    name = "kernel_headers"
    long_running = True
    args_model = KernelHeadersArgs

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: KernelHeadersArgs = args
        have = set(ctx.facts.kernels.headers)
        missing = [k for k in dict.fromkeys(a.kernels) if k not in have]
        if not missing:
            return []
        names = " ".join(q(f"linux-headers-{k}") for k in missing)
        # only what apt can install, so that the driver still goes in and DKMS says why
        step = (
            f"want=''; for p in {names}; do"
            " if apt-cache policy -- \"$p\" 2>/dev/null | grep -q 'Candidate: [0-9]'; then"
            ' want="$want $p"; else echo "no installation candidate for $p:'
            ' DKMS cannot build for that kernel" >&2; fi; done;'
            f' [ -z "$want" ] || {apt_get(ctx.apt_lock_timeout)} --no-install-recommends'
            " install -- $want"
        )
        reason = "no kernel headers for " + ", ".join(missing)
        return [ctx.change(self, reason, [step], apt=True)]


class DkmsBuiltArgs(Args):
    module: ModuleName = Field(description="The DKMS module's name, e.g. nvidia.")
    version: DebVersion = Field(description="The module's version, e.g. 580.95.05.")
    kernels: list[KernelRelease] = Field(
        description="Kernel releases it must be installed for: the running one and the one"
        " the next boot loads."
    )


class DkmsBuilt(Operation):
    """A DKMS module installed for each kernel listed, checked before the host reboots.

    Its change runs after the host's other changes, just before the reboot. It yields one
    when `dkms status` (in the facts) does not say `installed` for a kernel. The change
    checks `dkms status` again when it runs (the driver's package may have built the module
    since), and otherwise runs `dkms install -m M -v V -k K`. When the build fails the
    change fails with the last lines of DKMS's
    `/var/lib/dkms/<module>/<version>/build/make.log`, so the host stops before a reboot
    into a kernel without the module.

    ```yaml
    - name: nvidia module built
      op: dkms_built
      module: nvidia
      version: 580.95.05
      kernels: [6.8.0-45-generic]
    ```
    """

    name = "dkms_built"
    long_running = True
    before_reboot = True
    args_model = DkmsBuiltArgs

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        a: DkmsBuiltArgs = args
        todo = [
            k
            for k in dict.fromkeys(a.kernels)
            if not ctx.facts.dkms_installed(a.module, a.version, k)
        ]
        if not todo:
            return []
        log = f"/var/lib/dkms/{a.module}/{a.version}/build/make.log"
        steps = []
        for k in todo:
            mvk = f"-m {q(a.module)} -v {q(a.version)} -k {q(k)}"
            steps.append(
                f"dkms status {mvk} 2>/dev/null | grep -q ': installed'"
                f" || dkms install {mvk} || {{ rc=$?;"
                f" echo {q(LOG_TAIL + log)} >&2;"
                f" tail -n {MAKE_LOG_LINES} -- {q(log)} >&2 2>/dev/null"
                f" || echo '(no make.log)' >&2; exit $rc; }}"
            )
        reason = f"{a.module}/{a.version} not installed by DKMS for {', '.join(todo)}"
        return [ctx.change(self, reason, steps)]
