"""Check a host's declared stack against the compatibility rules, before touching it."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from gpunode.changes import LOCK_SAY_EVERY
from gpunode.compat import rules as r
from gpunode.compat.driver import (
    driver_satisfies,
    flavor_problem,
    toolkit_problem,
    torch_variant,
)
from gpunode.compat.frameworks import conda_tos_channels
from gpunode.components import COMPONENTS
from gpunode.inventory.model import Conda, Host
from gpunode.versions import dotted_key


@dataclass(frozen=True)
class Finding:
    loc: tuple[str | int, ...]  # field path inside the host, e.g. ("stack", "cuda", "toolkits", 0)
    message: str


def check_host(host: Host) -> list[Finding]:
    out: list[Finding] = []
    stack = host.stack
    driver = stack.driver
    branch = driver.branch if driver else None
    release = driver.version if driver else None
    toolkits = stack.cuda.toolkits if stack.cuda else []
    default = stack.cuda.default_toolkit if stack.cuda else None

    model = host.gpus.model
    if model and r.gpu_arch(model) is None:
        out.append(Finding(("gpus", "model"), _unknown_model(model)))
    flavor = flavor_problem(driver, model) if driver else None
    if flavor:
        out.append(Finding(("stack", "driver", "flavor"), flavor))

    for i, cuda in enumerate(toolkits):
        needed = r.min_driver(cuda)
        if needed is None:
            known = ", ".join(r.known_toolkits())
            out.append(
                Finding(
                    ("stack", "cuda", "toolkits", i),
                    f"unknown CUDA toolkit {cuda!r}: known toolkits are {known}",
                )
            )
            continue
        problem = toolkit_problem(driver, cuda, needed) if driver else None
        if problem:
            out.append(Finding(("stack", "cuda", "toolkits", i), problem))

    cudnn = stack.cudnn.version if stack.cudnn else None
    if default and cudnn and r.cudnn_names(cudnn, default) is None:
        majors = r.cudnn_majors(default)
        hint = f'use cudnn: "{majors[-1]}"' if majors else "no cuDNN is known for it"
        out.append(
            Finding(
                ("stack", "cudnn"),
                f"cuDNN {cudnn.split('.')[0]} has no packages for CUDA {default}: {hint}",
            )
        )
    # the components built per CUDA major (gpunode.components); TensorRT says so itself
    per_major = [c.title for c in COMPONENTS if c.per_cuda_major and c.field != "tensorrt"
                 and getattr(stack, c.field)]  # fmt: skip
    if per_major and not default:
        *first, last = per_major
        named = f"{', '.join(first)} and {last}" if first else last
        out.append(
            Finding(
                ("stack", "cuda"),
                f"{named} builds follow the CUDA toolkit: declare cuda: {{toolkits: [...]}}",
            )
        )

    out.extend(_tensorrt(stack.tensorrt.version if stack.tensorrt else None, default))

    if stack.conda:
        for name, env in stack.conda.envs.items():
            if env.pytorch:
                out.extend(_torch(name, env.pytorch, default, branch, release))
                out.extend(_torch_python(name, env.pytorch, env.python))
            out.extend(_companions(name, env.pytorch, env.torchvision, env.torchaudio))
            if env.tensorflow:
                out.extend(_tensorflow(name, env.tensorflow, branch, release))
        out.extend(_conda_tos(stack.conda, host.repos.conda_installer))
    out.extend(_timeouts(host))
    return out


def _timeouts(host: Host) -> list[Finding]:
    """Timeouts that could not work as written: a wait or a silence longer than the time
    any one command is given, or a silence shorter than a lock wait's own lines."""
    apt, ssh = host.apt, host.ssh
    out = []
    if apt.inactivity_timeout > ssh.command_timeout:
        out.append(Finding(("apt", "inactivity_timeout"), (
            f"{apt.inactivity_timeout:g} s is longer than ssh.command_timeout"
            f" ({ssh.command_timeout:g} s), which stops any command first: lower it,"
            " or raise ssh.command_timeout")))  # fmt: skip
    if apt.inactivity_timeout <= LOCK_SAY_EVERY:
        out.append(Finding(("apt", "inactivity_timeout"), (
            f"{apt.inactivity_timeout:g} s is too short: a step waiting for the dpkg or"
            f" apt lock says who holds it every {LOCK_SAY_EVERY} s, and would be taken for"
            f" a silent host; use more than {LOCK_SAY_EVERY}")))  # fmt: skip
    if apt.lock_timeout >= ssh.command_timeout:
        out.append(Finding(("apt", "lock_timeout"), (
            f"{apt.lock_timeout} s is not shorter than ssh.command_timeout"
            f" ({ssh.command_timeout:g} s), which would stop the wait first: lower it,"
            " or raise ssh.command_timeout")))  # fmt: skip
    return out


def _torch(
    env: str, torch: str, cuda: str | None, branch: str | None, release: str | None
) -> list[Finding]:
    loc = ("stack", "conda", "envs", env, "pytorch")
    variants = r.torch_variants(torch)
    if not variants:
        known = ", ".join(sorted(r.rules()["torch_variants"], key=dotted_key))
        return [Finding(loc, f"unknown PyTorch release {torch!r}: known releases are {known}")]
    releases = r.torch_releases(torch)
    if r.torch_release(torch) not in releases:
        newest = releases[-1] if releases else r.minor(torch)
        return [
            Finding(
                loc,
                f"PyTorch {torch} is not a release: {r.minor(torch)} has "
                f"{', '.join(releases) or 'none'} (pip would find no such torch, nor a "
                f'torchvision for it): use pytorch: "{newest}"',
            )
        ]
    if torch_variant(torch, cuda, branch, release) is None:
        need = min((r.min_driver(r.variant_cuda(v)) or "0" for v in variants), key=dotted_key)
        return [
            Finding(
                loc,
                f"PyTorch {torch} wheels ({', '.join(variants)}) need driver >= "
                f"{need}, but branch {branch} is requested: use a newer branch",
            )
        ]
    return []


def _torch_python(env: str, torch: str, python: str) -> list[Finding]:
    """The env's Python must be one the PyTorch release has wheels for."""
    wheels = r.torch_python(torch)
    series = r.minor(python)
    if wheels is None or "." not in series:
        return []  # an unknown release is reported already; "3" lets conda pick
    low, high = wheels
    if dotted_key(low) <= dotted_key(series) <= dotted_key(high):
        return []
    too_new = dotted_key(series) > dotted_key(high)
    newer = r.torch_for_python(series) if too_new else None
    other = f', or a PyTorch with wheels for it (pytorch: "{newer}" or newer)' if newer else ""
    return [
        Finding(
            ("stack", "conda", "envs", env, "python"),
            f"PyTorch {r.minor(torch)} has wheels for Python {low} to {high}, not {series}: "
            f'use python: "{high if too_new else low}"{other}',
        )
    ]


def _unknown_model(model: str) -> str:
    known = r.known_gpu_models()
    by_lower = {k.lower(): k for k in known}
    # cutoff 0.5: a letter typed for a digit ("H1OO") still finds its model
    close = difflib.get_close_matches(model.lower(), by_lower, n=1, cutoff=0.5)
    if close:
        return (
            f"unknown GPU model {model!r}: did you mean {by_lower[close[0]]!r}? "
            "(the smoke tests expect the model named here)"
        )
    return f"unknown GPU model {model!r}: known models are {', '.join(known)}"


def _companions(env: str, torch: str | None, vision: bool, audio: bool) -> list[Finding]:
    """torchvision and torchaudio follow the env's PyTorch (every release in the table has
    both: a release without them is not one, which `_torch` reports)."""
    asked = [n for n, on in (("torchvision", vision), ("torchaudio", audio)) if on]
    if not asked or torch is not None:
        return []
    loc = ("stack", "conda", "envs", env, asked[0])
    return [Finding(loc, f"{asked[0]} follows the env's PyTorch: set pytorch too")]


def _conda_tos(conda: Conda, installer: str) -> list[Finding]:
    tos = conda_tos_channels(conda.channels, installer)
    if not conda.envs or not tos or conda.tos == "accept":
        return []
    return [
        Finding(
            ("stack", "conda", "tos"),
            f"the channels {', '.join(tos)} need Anaconda's Terms of Service accepted, and "
            "conda stops a non-interactive run until they are: set conda.tos: accept to "
            "accept them, or conda.channels: [conda-forge] to use conda-forge only",
        )
    ]


def _tensorflow(env: str, tf: str, branch: str | None, release: str | None) -> list[Finding]:
    loc = ("stack", "conda", "envs", env, "tensorflow")
    tested = r.tensorflow_tested(tf)
    if tested is None:
        known = ", ".join(sorted(r.rules()["tensorflow_tested"], key=dotted_key))
        return [Finding(loc, f"unknown TensorFlow release {tf!r}: known releases are {known}")]
    needed = r.min_driver(tested["cuda"])
    if branch and needed and not driver_satisfies(branch, needed, release):
        return [
            Finding(
                loc,
                f"TensorFlow {tf} is built for CUDA {tested['cuda']}, which needs "
                f"driver >= {needed}, but branch {branch} is requested",
            )
        ]
    return []


def _tensorrt(spec: str | None, cuda: str | None) -> list[Finding]:
    if spec is None:
        return []
    loc = ("stack", "tensorrt")
    major = spec.split(".")[0]
    if not cuda:
        return [
            Finding(
                loc,
                f"TensorRT {major} builds follow the CUDA toolkit: declare cuda: "
                "{toolkits: [...]} (its default toolkit picks the build), or drop tensorrt",
            )
        ]
    if r.tensorrt_packages(spec, cuda) is None:
        majors = r.tensorrt_majors(cuda)
        hint = f'use tensorrt: "{majors[-1]}"' if majors else "no TensorRT is known for it"
        return [Finding(loc, f"TensorRT {major} has no packages for CUDA {cuda}: {hint}")]
    return []
