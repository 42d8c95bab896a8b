"""The operations roles are built from, by name."""

from __future__ import annotations

from gpunode.roles.ops.apt import AptPackages, AptRepository
from gpunode.roles.ops.base import OpContext, Operation
from gpunode.roles.ops.conda import Conda, CondaEnv, Pip
from gpunode.roles.ops.conda_files import CondaEnvFile
from gpunode.roles.ops.conda_tos import CondaTos
from gpunode.roles.ops.files import File, LineInFile, ModuleBlacklist, Template
from gpunode.roles.ops.kernel import DkmsBuilt, KernelHeaders
from gpunode.roles.ops.module import ModuleReload
from gpunode.roles.ops.system import Alternatives, Command, Reboot, Service
from gpunode.roles.probe import Probe

OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        AptRepository(),
        AptPackages(),
        File(),
        Template(),
        LineInFile(),
        ModuleBlacklist(),
        Alternatives(),
        Service(),
        Command(),
        Reboot(),
        Conda(),
        CondaTos(),
        CondaEnv(),
        Pip(),
        CondaEnvFile(),
        KernelHeaders(),
        DkmsBuilt(),
        ModuleReload(),
    )
}

__all__ = ["OPERATIONS", "OpContext", "Operation", "Probe"]
