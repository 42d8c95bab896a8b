"""The stack's components, declared once: what each is in the inventory, which role installs
it and when, what its packages are called and where they come from, how its version moves,
which smoke tests and doctor rules are its, and which facts it reads.

Every list that names components or smoke tests derives from these tables: the roles a
stack runs (`roles.walk.builtin_roles`), the packages whose versions resolve asks about
(`resolve.wanted_names`), the packages the facts script lists, the inventory's smoke test
names, the smoke runner's defaults, the suite driver's dispatch on the host and the CLI's
`--only` choices. tests/test_components.py checks that they agree.

Plain data and the standard library alone: the smoke suite ships this file to the host (its
driver reads SMOKE_TESTS there, with Python 3.8 or later), and `gpunode smoke --help` reads
it without importing the runner.
"""

from __future__ import annotations

from typing import NamedTuple


class Component(NamedTuple):
    """One part of the stack. `role` runs when the inventory declares `field` (a mapping, a
    spec, or true); roles run in the table's order."""

    field: str
    """The key under `stack:` (inventory/model.py `Stack`)."""
    spec: str
    """Its model: the class in inventory/model.py."""
    role: str
    """The built-in role (roles/<role>/) that installs it."""
    title: str = ""
    """What messages call it."""
    versioned: str = ""
    """Where the inventory writes its version, under `stack:` (`cudnn`: a spec alone is
    short for `{version: ...}`; `containers.version`)."""
    packages: tuple[str, ...] = ()
    """What its packages are called: `{major}` is the default toolkit's CUDA major; `rules:`
    names a naming rule of gpunode/compat/rules.yaml (the name depends on the version)."""
    per_cuda_major: bool = False
    """Its builds are made per CUDA major (`+cuda12.8`, `-cuda12`): the default toolkit's."""
    builds: str = "fit"
    """Which `+cudaX.Y` builds are the toolkit's: `fit` (the toolkit's major, not newer than
    it; an unmarked version fits any) or `major` (the newest release built for the toolkit's
    major, preferring a build not newer than the toolkit)."""
    named_by_major: bool = False
    """Its package names carry its own major (libcudnn9-cuda-12): a refusal also advises
    the major alone."""
    repository: str | None = None
    """The repository it comes from: `nvidia` (repos.nvidia, NVIDIA's CUDA repository),
    `nvidia_container` (repos.nvidia_container); none: not from a repository gpunode adds.
    Where the controller cannot read a repository's index, the host's apt is asked
    (`versions_on_host`), the same way for each."""
    policy: str | None = None
    """How its version is chosen (gpunode/resolve): `package` (resolve_package: an installed
    version that satisfies the spec is kept unless `update: latest`, else the newest of the
    spec in the index, the build for the default toolkit's CUDA where `per_cuda_major`),
    `driver`, `toolkit`; none: no version."""
    hold: bool = False
    """Has `update: keep|latest` and `hold` (apt-mark hold, on by default)."""
    smoke: tuple[str, ...] = ()
    """Its smoke tests (SMOKE_TESTS)."""
    doctor: tuple[str, ...] = ()
    """The prefixes of its doctor rules' ids (gpunode/doctor/rules.py)."""
    facts: tuple[str, ...] = ()
    """The HostFacts fields it reads."""
    dpkg: tuple[str, ...] = ()
    """dpkg-query patterns for the facts script's package list (HostFacts.packages)."""
    when: str | None = None
    """An attribute of its value that must be true as well for the role to run."""
    unattended: tuple[str, ...] = ()
    """unattended-upgrades' blacklist entries that keep it off its packages (Python
    regular expressions matched from the start of a package's name); the first may be a
    `// comment`."""


COMPONENTS: tuple[Component, ...] = (
    Component(
        "driver", "Driver", "driver",
        packages=("rules:driver",),
        repository="nvidia", policy="driver", hold=True,
        smoke=("nvidia-smi",),
        doctor=("driver.", "gpu."),
        facts=("packages", "module", "smi", "dkms", "kernels", "apt_versions", "secure_boot",
               "fabric"),
        dpkg=("nvidia*", "libnvidia*", "xserver-xorg-video-nouveau", "linux-headers-*",
              "linux-modules-nvidia*", "linux-objects-nvidia*", "linux-signatures-nvidia*",
              "dkms", "mokutil"),
        unattended=("// the driver, its libraries, Ubuntu's prebuilt modules and Fabric Manager",
                    "nvidia-", "libnvidia-", "xserver-xorg-video-nvidia-", "linux-modules-nvidia-",
                    "linux-objects-nvidia-", "linux-signatures-nvidia-", "nvidia-fabricmanager"),
    ),
    Component(
        "cuda", "Cuda", "cuda_toolkit",
        packages=("cuda-toolkit-{major}-{minor}",),
        repository="nvidia", policy="toolkit", when="toolkits",
        smoke=("cuda-vectoradd",),
        doctor=("cuda.",),
        facts=("packages", "toolkits"),
        dpkg=("cuda*", "libcuda*"),
        unattended=("// the CUDA toolkit and its libraries", "cuda-", "libcublas", "libcufft",
                    "libcufile", "libcurand", "libcusolver", "libcusparse", "libnpp",
                    "libnvjitlink", "libnvjpeg"),
    ),
    Component(
        "cudnn", "Package", "cudnn", "cuDNN", "cudnn",
        packages=("rules:cudnn",), named_by_major=True,
        per_cuda_major=True, repository="nvidia", policy="package", hold=True,
        facts=("packages", "cudnn_version"),
        dpkg=("libcudnn*",),
        unattended=("libcudnn", "cudnn"),
    ),
    Component(
        "nccl", "Package", "nccl", "NCCL", "nccl",
        packages=("libnccl2", "libnccl-dev"),
        per_cuda_major=True, repository="nvidia", policy="package", hold=True,
        smoke=("nccl-allreduce",),
        facts=("packages", "nccl_version"),
        dpkg=("libnccl*",),
        unattended=("libnccl",),
    ),
    Component(
        "tensorrt", "TensorRT", "tensorrt", "TensorRT", "tensorrt",
        packages=("rules:tensorrt",), builds="major",
        per_cuda_major=True, repository="nvidia", policy="package", hold=True,
        smoke=("tensorrt",),
        facts=("packages",),
        dpkg=("libnvinfer*", "libnvonnxparsers*", "tensorrt*", "python3-libnvinfer*"),
        unattended=("libnvinfer", "libnvonnxparsers", "tensorrt", "python3-libnvinfer"),
    ),
    Component(
        "dcgm", "Dcgm", "dcgm", "DCGM", "dcgm",
        packages=("datacenter-gpu-manager-4-cuda{major}", "datacenter-gpu-manager-4-core"),
        per_cuda_major=True, repository="nvidia", policy="package", hold=True,
        smoke=("dcgm",),
        facts=("packages", "module"),
        dpkg=("datacenter-gpu-manager*",),
        unattended=("datacenter-gpu-manager",),
    ),
    Component("cuda_env", "bool", "cuda_env", facts=("toolkits",)),
    Component(
        "conda", "Conda", "conda",
        smoke=("torch", "torch-matmul", "tensorflow"),
        facts=("conda",),
    ),
    Component(
        "containers", "Containers", "container_toolkit", "NVIDIA Container Toolkit",
        "containers.version",
        packages=("nvidia-container-toolkit", "nvidia-container-toolkit-base",
                  "libnvidia-container-tools", "libnvidia-container1"),
        repository="nvidia_container", policy="package", hold=True,
        smoke=("containers",),
        facts=("packages", "containers", "smi"),
    ),
)  # fmt: skip

PRELUDE = ("unattended_upgrades",)
"""The roles before every component while any component from NVIDIA's repository is
declared: unattended upgrades are held back first."""


class Repository(NamedTuple):
    """A repository components come from: `repos.<key>` says where (null: not managed
    here), its role adds it before the first component that needs it. Where the
    controller cannot read its index, the plan adds every repository alone and the host's
    apt says which versions they offer (`versions_on_host`)."""

    key: str
    role: str
    title: str


REPOSITORIES: tuple[Repository, ...] = (
    Repository("nvidia", "nvidia_repo", "the NVIDIA repository"),
    Repository("nvidia_container", "container_repo", "the libnvidia-container repository"),
)


def repository(key: str) -> Repository:
    return next(r for r in REPOSITORIES if r.key == key)


class SmokeTest(NamedTuple):
    """One test of the suite, as the suite's driver runs it on the host."""

    name: str
    script: str
    """The file in gpunode/smoke/suite/."""
    runs: str
    """`system`: once, with the system python3; `each`: in every environment that has
    `module`; `first`: in the first such environment (a property of the host, not of the
    env); `bindings`: in each environment with `module`, else the system python3 (asked
    for, it is never skipped)."""
    module: str | None = None
    args: tuple[str, ...] = ()
    """Arguments; `{count}` expands to `--count N` (the inventory's gpus.count), `{image}`
    to `--image REF` (stack.containers.image)."""
    selected: str = "always"
    """When it runs without `--only` or stack.smoke: `always`, `declared` (while its
    component is declared) or `asked` (only when named)."""


SMOKE_TESTS: tuple[SmokeTest, ...] = (
    SmokeTest("nvidia-smi", "check_nvidia_smi.py", "system", args=("{count}",)),
    SmokeTest("cuda-vectoradd", "check_cuda_vectoradd.py", "system"),
    SmokeTest("torch", "check_torch.py", "each", "torch", ("--part", "all", "{count}")),
    SmokeTest("torch-matmul", "check_torch.py", "each", "torch", ("--part", "matmul", "{count}"),
              selected="asked"),
    SmokeTest("tensorflow", "check_tensorflow.py", "each", "tensorflow"),
    # the interconnect is the host's, not the env's: one run is enough
    SmokeTest("nccl-allreduce", "check_nccl.py", "first", "torch"),
    SmokeTest("containers", "check_containers.py", "system", args=("{count}", "{image}"),
              selected="asked"),
    SmokeTest("tensorrt", "check_tensorrt.py", "bindings", "tensorrt", selected="declared"),
    SmokeTest("dcgm", "check_dcgm.py", "system", args=("{count}",), selected="declared"),
)  # fmt: skip

SUITE_TESTS: tuple[str, ...] = tuple(t.name for t in SMOKE_TESTS)
"""The suite's tests, in the order they run."""

MULTINODE = "nccl-multinode"
"""`gpunode smoke --only nccl-multinode`: one torchrun per host (smoke/multinode.py), not
part of the suite."""

CLI_TESTS: tuple[str, ...] = (*SUITE_TESTS, MULTINODE)
"""What `gpunode smoke --only` accepts."""


def component_of(test: str) -> Component:
    """The component a smoke test belongs to."""
    return next(c for c in COMPONENTS if test in c.smoke)


def by_field(field: str) -> Component:
    return next(c for c in COMPONENTS if c.field == field)


def dpkg_patterns() -> tuple[str, ...]:
    """Every component's dpkg-query patterns, once each."""
    return tuple(dict.fromkeys(p for c in COMPONENTS for p in c.dpkg))
