"""The inventory's shape: what a lab admin declares, validated strictly.

Every model forbids unknown keys and coerces nothing: a version written as a
YAML number, or `yes` where a boolean belongs, is an error with a hint rather
than a silent surprise (an unquoted `cuda: 12.10` is the float 12.1).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PrivateAttr,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from gpunode.components import SUITE_TESTS
from gpunode.inventory import specfiles
from gpunode.inventory.checks import (
    bin_dir,
    conda_channel,
    conda_prefix,
    env_value,
    host_address,
    http_url,
    proxy_jump,
    spec_file,
    spec_file_text,
    ssh_config_file,
    ssh_option_name,
    ssh_option_value,
    ssh_options,
)
from gpunode.inventory.text import bad_strings
from gpunode.memo import once

# Patterns are Python `re` (Strict sets the engine): `[0-9]`, not `\d`, which matches any
# Unicode digit ("３.１１"); `\A...\Z`, not `^...$`, which accepts a trailing newline.
Version = Annotated[str, StringConstraints(pattern=r"\A[0-9]+(\.[0-9]+)*\Z")]
"""A dotted numeric version written as a quoted string: "12.4", "550", "2.21"."""

NAME = r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z"
Name = Annotated[str, StringConstraints(pattern=NAME)]

PackageSpec = Annotated[
    str, StringConstraints(pattern=r"\A[0-9]+(\.[0-9]+)*(-[0-9A-Za-z][0-9A-Za-z.+~]*)?\Z")
]
"""A release series ("9", "9.10", "2.26": the newest of it when installing; any installed
one is kept) or a full Debian version ("9.14.0.64-1", "2.26.2-1+cuda12.8": exactly that)."""

Release = Annotated[str, StringConstraints(pattern=r"\A[0-9]+\.[0-9]+(\.[0-9]+)*\Z")]
"""One driver release, as NVIDIA numbers it: "550.163.01"."""

LOGIN_NAME = r"\A[A-Za-z_][A-Za-z0-9_.-]{0,31}\Z"
LoginName = Annotated[str, StringConstraints(pattern=LOGIN_NAME)]
ENV_NAME = r"\A[A-Za-z_][A-Za-z0-9_]*\Z"
EnvName = Annotated[str, StringConstraints(pattern=ENV_NAME)]

Url = Annotated[str, AfterValidator(http_url)]
"""An absolute http(s) URL: a host, no credentials, no whitespace or control characters."""
RepoUrl = Annotated[str, AfterValidator(lambda v: http_url(v, query=False))]
"""A Url that apt appends paths to: no ?query or #fragment either."""
Address = Annotated[str, AfterValidator(host_address)]
"""A hostname, IPv4 address or IPv6 address (brackets optional): nothing a shell or an
ssh_config `%h` expansion could read as more."""
CondaPrefix = Annotated[str, AfterValidator(conda_prefix)]
CondaChannel = Annotated[str, AfterValidator(conda_channel)]
SpecFile = Annotated[str, AfterValidator(spec_file)]
JumpSpec = Annotated[str, AfterValidator(proxy_jump)]
SshOptionName = Annotated[str, AfterValidator(ssh_option_name)]
SshOptionValue = Annotated[str | int, AfterValidator(ssh_option_value)]
SshConfigFile = Annotated[str, AfterValidator(ssh_config_file)]

PATTERN_HINTS = {
    NAME: "a name: letters, digits, `_`, `.` and `-`, starting with a letter or digit",
    LOGIN_NAME: "a login name: letters, digits, `_`, `.` and `-`, starting with a letter "
    "or `_`, at most 32",
    ENV_NAME: "an environment variable name: letters, digits and `_`, not starting with a digit",
}
"""What a pattern means, for error messages."""


class Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        regex_engine="python-re",
        # No use_attribute_docstrings: reading every model's source is a third of this
        # module's import, and only `gpunode schema` and the reference pages show them
        # (described() fills them in then).
    )

    @field_validator("*", mode="before")
    @classmethod
    def _plain_text(cls, value: Any) -> Any:
        # The loader refuses these first, with positions; this guards models built in code.
        found = next(bad_strings(value), None)
        if found:
            raise ValueError(found[2])
        return value

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # Editors read the schema with ECMA regex, which has no \A or \Z.
        schema = handler(core_schema)
        _editor_patterns(handler.resolve_ref_schema(schema))
        return schema


@once  # each model's descriptions filled in, and its schema rebuilt, once per process
def described() -> None:
    """Give each field of the inventory's models its attribute docstring as description
    (pydantic's use_attribute_docstrings, done when a schema or reference page asks), and
    rebuild the models' schemas with them, each model after the ones it holds."""
    import inspect

    from pydantic._internal._docs_extraction import extract_docstrings_from_cls

    models: list[type[Strict]] = []
    todo: list[type[Strict]] = [Strict]
    while todo:
        cls = todo.pop(0)
        models.append(cls)
        todo += [c for c in cls.__subclasses__() if c not in models and c not in todo]
    docs = {cls: extract_docstrings_from_cls(cls, use_inspect=True) for cls in models}
    for cls in sorted(models[1:], key=lambda c: inspect.getsourcelines(c)[1]):
        for name, info in cls.model_fields.items():
            said = (docs[b].get(name) for b in cls.__mro__ if b in docs)
            if info.description is None:
                info.description = next((d for d in said if d is not None), None)
        cls.model_rebuild(force=True)


def _editor_patterns(node: Any) -> None:
    if isinstance(node, dict):
        pattern = node.get("pattern")
        if isinstance(pattern, str) and pattern.startswith("\\A") and pattern.endswith("\\Z"):
            node["pattern"] = f"^{pattern[2:-2]}$"
        for value in node.values():
            _editor_patterns(value)
    elif isinstance(node, list):
        for value in node:
            _editor_patterns(value)


class AptSettings(Strict):
    lock_timeout: Annotated[int, Field(ge=0, le=3600)] = 120
    """Seconds apt and dpkg wait for a dpkg lock, or apt's list lock, another process holds,
    then fail naming it and its holder; shorter than ssh.command_timeout."""
    inactivity_timeout: Annotated[float, Field(gt=0)] = 300.0
    """Seconds an apt step (a download, an install; conda, pip and the smoke tests too) may
    go without output before the host is reported unreachable, as written: usually longer
    than ssh.inactivity_timeout, for slow mirrors; more than 5 (a lock wait speaks every
    5 s) and at most ssh.command_timeout."""


class Hooks(Strict):
    """Shell run on the host, as root through the transport, around a disruptive change (a
    reboot or a driver change while a module is loaded); Jinja with `host` and `address`."""

    before_disrupt: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    """Before the host's first change, e.g. drain it from the scheduler; failing, it fails
    the host before anything changed."""
    after_disrupt: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    """Once the host is back and read again, e.g. resume it; not run when the apply failed
    (a failed host stays drained)."""


class RebootSettings(Strict):
    timeout: Annotated[float, Field(gt=0)] | None = None
    """Seconds a rebooting host may take to come back with a new boot id (default 600;
    `apply --reboot-timeout` wins)."""


class SshSettings(Strict):
    user: LoginName = "ubuntu"
    """The login user on the host."""
    port: Annotated[int, Field(ge=1, le=65535)] = 22
    """The SSH port."""
    identity_file: str | None = None
    """A private key file; none: the SSH agent and the ssh config's keys."""
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    """strict: the host's key must already be in known_hosts. accept-new: an unknown host's key is
    added on first contact; a changed key is refused either way."""
    known_hosts_file: str = "~/.ssh/known_hosts"
    """The known_hosts file host keys are checked against (and added to, with accept-new)."""
    config_file: SshConfigFile | None = "~/.ssh/config"
    """The ssh config file read for HostName, User, Port, IdentityFile and ProxyJump; null: none.
    A file other than your own ~/.ssh/config whose lines (or Includes) run commands on the
    controller (ProxyCommand, LocalCommand, KnownHostsCommand, `Match exec`, ...) is refused
    unless this machine allows it (`allow_ssh_commands` in your own gpunode.toml)."""
    connect_timeout: Annotated[float, Field(gt=0)] = 10.0
    """Seconds to wait for the TCP connection and the SSH login."""
    command_timeout: Annotated[float, Field(gt=0)] = 1800.0
    """Seconds one command may run in all before it is stopped and the host failed."""
    keepalive: Annotated[float, Field(ge=0)] = 15.0
    """Seconds between SSH keepalive messages on an idle connection; 0: none."""
    inactivity_timeout: Annotated[float, Field(gt=0)] = 30.0
    """Seconds a command may go without output and without exiting before the host is
    reported unreachable ("no output for N s"): a silent host or a dead peer."""
    transport: Literal["paramiko", "openssh"] = "paramiko"
    """paramiko: SSH inside gpunode. openssh: the system's `ssh` client over one
    multiplexed connection per host, with everything OpenSSH reads (Include, ProxyCommand,
    /etc/ssh/ssh_config, every known_hosts file, host certificates, GSSAPI)."""
    proxy_jump: JumpSpec | None = None
    """Jump hosts, as `ssh -J`: `[user@]host[:port]`, comma-separated; wins over ProxyJump
    in the ssh config."""
    options: Annotated[dict[SshOptionName, SshOptionValue], AfterValidator(ssh_options)] = Field(
        default_factory=dict
    )
    """Extra `-o Name=value` options for the openssh transport. Options that would run
    commands or load code on the controller (ProxyCommand, LocalCommand, KnownHostsCommand,
    Include, PKCS11Provider, ...) are refused unless this machine allows them
    (`allow_ssh_commands` in your own gpunode.toml, or GPUNODE_ALLOW_SSH_COMMANDS=1)."""


Sha256 = Annotated[str, StringConstraints(pattern=r"\A[0-9a-f]{64}\Z")]

# Miniconda's versioned installer and its published sha256 (repo.anaconda.com/miniconda).
CONDA_INSTALLER = "https://repo.anaconda.com/miniconda/Miniconda3-py312_24.7.1-0-Linux-x86_64.sh"
CONDA_INSTALLER_SHA256 = "33442cd3813df33dcbb4a932b938ee95398be98344dff4c30f7e757cd2110e4f"
# NVIDIA's cuda-keyring_1.1-1_all.deb in each repository folder (it names its folder, so
# each folder's file differs).
CUDA_KEYRING_SHA256 = {
    "ubuntu2004": "cf5ca9853118b9fb2b78dd2708786e1eb5ab14e39d8738539281429428eb4efe",
    "ubuntu2204": "d93190d50b98ad4699ff40f4f7af50f16a76dac3bb8da1eaaf366d47898ff8df",
    "ubuntu2404": "d2a6b11c096396d868758b86dab1823b25e14d70333f1dfa74da5ddaf6a06dba",
}


# The key NVIDIA signs libnvidia-container with (https://nvidia.github.io/libnvidia-container/gpgkey).
NVIDIA_CONTAINER_KEY_FINGERPRINT = "C95B321B61E88C1809C4F759DDCAE044F796ECB0"
KeyFingerprint = Annotated[str, StringConstraints(pattern=r"\A[0-9A-F]{40}\Z")]
"""An OpenPGP v4 fingerprint: 40 upper-case hex digits, no spaces."""


class Repos(Strict):
    nvidia: RepoUrl | None = "https://developer.download.nvidia.com/compute/cuda/repos"
    """NVIDIA's CUDA repository or a mirror of it; null where the packages come from
    elsewhere (a prepared image, an air-gapped site's own tooling)."""
    conda_installer: Url = CONDA_INSTALLER
    """A versioned Miniconda installer (never `latest`: its sha256 is pinned below)."""
    conda_installer_sha256: Sha256 = CONDA_INSTALLER_SHA256
    """The installer's sha256: checked before it runs."""
    cuda_keyring_sha256: dict[Name, Sha256] = Field(
        default_factory=lambda: dict(CUDA_KEYRING_SHA256)
    )
    """sha256 of cuda-keyring_1.1-1_all.deb per repository folder (ubuntu2204, ...): the
    trust anchor for every NVIDIA package. A mirror serves NVIDIA's files unchanged."""
    pytorch_index: Url = "https://download.pytorch.org/whl"
    """PyTorch's wheel index (or a mirror): the CUDA builds of torch come from here."""
    pypi_index: Url | None = None
    """A PyPI mirror for pip in the conda envs; none: pip's own default."""
    insecure_http: bool = False
    """Allow http:// for these repositories: for labs on a closed network only."""
    nvidia_container: RepoUrl | None = "https://nvidia.github.io/libnvidia-container"
    """NVIDIA's libnvidia-container repository (the container toolkit) or a mirror of it:
    its `stable/deb/$(ARCH)` folder and its `gpgkey`; null where the packages come from
    elsewhere."""
    nvidia_container_key_fingerprint: KeyFingerprint = NVIDIA_CONTAINER_KEY_FINGERPRINT
    """The fingerprint the repository's `gpgkey` must have: checked before it is installed.
    A mirror serves NVIDIA's key unchanged."""


class Driver(Strict):
    branch: Version = "580"
    """Any release of this branch is acceptable: an installed one is kept, none installed
    gets the newest the repository has."""
    version: Release | None = None
    """One release exactly; it must belong to `branch` (set alone, it names the branch)."""
    update: Literal["keep", "latest"] = "keep"
    """latest: move an installed release to the newest of its branch in the repository."""
    flavor: Literal["open", "proprietary"] = "open"
    """The kernel modules: open (Turing and newer) or proprietary."""
    hold: bool = True
    """apt-mark hold the driver packages and pin their release for apt
    (/etc/apt/preferences.d/gpunode-nvidia-driver, also with `version`), so an unattended
    upgrade cannot move them."""
    reload: bool = False
    """Load a new driver (or fix a driver/library version mismatch) by unloading and
    loading the kernel module instead of rebooting, where that is safe: nothing holds the
    GPUs and nouveau is not loaded; a refused unload reboots after all. false: reboot."""
    source: Literal["nvidia", "ubuntu"] = "nvidia"
    """nvidia: NVIDIA's repository, its kernel module built by DKMS on the host (unsigned:
    with Secure Boot on, the DKMS key must be enrolled). ubuntu: Ubuntu's own archive,
    precompiled modules signed by Canonical (linux-modules-nvidia-*, as `ubuntu-drivers
    install --gpgpu`): no DKMS, no kernel headers, loads under Secure Boot."""
    server: bool = False
    """source: ubuntu only: the `-server` (datacenter) builds of the branch."""
    headless: bool = True
    """source: ubuntu only: nvidia-headless-no-dkms-* (no X); false: nvidia-driver-*."""

    @model_validator(mode="before")
    @classmethod
    def _branch_from_version(cls, data: object) -> object:
        if isinstance(data, dict) and "version" in data and "branch" not in data:
            version = data["version"]
            if isinstance(version, str):
                return {**data, "branch": version.split(".")[0]}
        return data

    @model_validator(mode="after")
    def _version_in_branch(self) -> Driver:
        if self.version is not None and self.version.split(".")[0] != self.branch:
            raise ValueError(
                f"version {self.version!r} is not a release of branch {self.branch!r}: "
                f'set branch: "{self.version.split(".")[0]}" too, or drop one of them'
            )
        if self.version is not None and self.update == "latest":
            raise ValueError("update: latest moves a branch; a pinned version cannot move")
        if self.source == "nvidia" and (self.server or not self.headless):
            raise ValueError(
                "server and headless choose among Ubuntu's packages: set source: ubuntu,"
                " or drop them"
            )
        return self


class Cuda(Strict):
    toolkits: list[Version] = Field(default_factory=lambda: ["13.0"])
    """CUDA toolkits to install side by side, as `major.minor` series."""
    default: Version | None = None
    """The toolkit /usr/local/cuda and the CUDA environment point at; none: the last of toolkits."""

    @property
    def default_toolkit(self) -> str | None:
        return self.default or (self.toolkits[-1] if self.toolkits else None)


PipVersion = Annotated[
    str,
    StringConstraints(
        pattern=r"\A[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?\Z"
    ),
]
"""An exact release as PyPI numbers it: "1.26.4", "2.0.0rc1"."""


class CondaEnv(Strict):
    python: Version = "3.11"
    """The env's Python series."""
    pytorch: Version | None = None
    """A PyTorch release, installed as the wheel built for the default toolkit's CUDA."""
    torchvision: bool = False
    """Install the torchvision release built with `pytorch`, from the same wheel index and
    CUDA variant (torch 2.7.1+cu128 -> torchvision 0.22.1+cu128)."""
    torchaudio: bool = False
    """Install the torchaudio release built with `pytorch` (2.7.1+cu128 with torch 2.7.1+cu128)."""
    tensorflow: Version | None = None
    """A TensorFlow release (its `and-cuda` extra)."""
    packages: dict[Name, PipVersion] = Field(default_factory=dict)
    """More PyPI packages for the env, each at an exact version: {numpy: "1.26.4"}."""
    environment_file: SpecFile | None = None
    """An environment.yml (path relative to the inventory) applied with `conda env update
    -f` whenever its content changes."""
    requirements_file: SpecFile | None = None
    """A requirements.txt (path relative to the inventory) applied with `pip install -r`
    whenever its content changes."""
    secret: bool = False
    """The env's files hold a secret (a token in an index URL): they may be files only you
    can read, are written 0600 on the hosts, and their content is never shown (`--diff`)
    or kept in run records. A file not world-readable is refused without it."""
    _texts: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _read_files(self, info: ValidationInfo) -> CondaEnv:
        # read once per merged host (the loader passes the inventory's folder), not while
        # the document's layers are checked
        base = (info.context or {}).get("base")
        for key in ("environment_file", "requirements_file"):
            rel = getattr(self, key)
            if rel is not None and base is not None:
                self._texts[key] = text = spec_file_text(Path(base), rel, secret=self.secret)
                # FILE:LINE of what cannot work on a host (-r of another file, a local path)
                specfiles.check(key.removesuffix("_file"), text, rel)
        return self

    @property
    def environment_text(self) -> str | None:
        """The environment file's content, read when the inventory was loaded."""
        return self._texts.get("environment_file")

    @property
    def requirements_text(self) -> str | None:
        """The requirements file's content, read when the inventory was loaded."""
        return self._texts.get("requirements_file")

    @property
    def spec_files(self) -> list[dict[str, str]]:
        """The env's declaring files as {kind, text, sha256, mode, source}, for the conda role."""
        return [
            {
                "kind": kind,
                "text": text,
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "mode": "0600" if self.secret else "0644",
                "source": source or "",
            }
            for kind, text, source in (
                ("environment", self.environment_text, self.environment_file),
                ("requirements", self.requirements_text, self.requirements_file),
            )
            if text is not None
        ]

    @property
    def pip_packages(self) -> list[dict[str, str]]:
        return [{"name": n, "version": v} for n, v in sorted(self.packages.items())]


class Conda(Strict):
    prefix: CondaPrefix = "/opt/conda"
    """Where Miniconda is installed."""
    envs: dict[Name, CondaEnv] = Field(default_factory=dict)
    """Conda envs by name."""
    channels: list[CondaChannel] | None = None
    """The only channels envs are made from (`--override-channels -c ...`), e.g.
    [conda-forge]; none: the installer's own (Miniconda: Anaconda's defaults)."""

    tos: Literal["accept"] | None = None
    """accept: accept Anaconda's Terms of Service for the default channels in use (`conda
    tos accept`), which conda >= 25 otherwise demands interactively. With the default
    channels in use, set this or `channels: [conda-forge]`: planning refuses neither."""

    @property
    def env_files(self) -> list[tuple[str, dict[str, str]]]:
        """(env, {kind, text, sha256}) for each env's declaring file, for the conda role."""
        return [(name, f) for name, env in self.envs.items() for f in env.spec_files]


class HourlyCost(Strict):
    """What one hour of a GPU (or of the whole host) costs: a cloud price, or an on-premise
    figure (amortised purchase, power, hosting). Only `gpunode cost`, `report --cost` and the
    smoke summary read it."""

    amount: Annotated[float, Field(gt=0)]
    """The price of one hour."""
    per: Literal["gpu", "host"] = "gpu"
    """Whether `amount` is for one GPU or for the whole host (divided by `gpus.count`)."""
    currency: Annotated[str, StringConstraints(pattern=r"\A[A-Z]{3}\Z")] = "USD"
    """An ISO 4217 code: USD, EUR, ... Types priced in different currencies are shown but
    never ranked against each other."""


class Gpus(Strict):
    """What the host is expected to have; used by checks and the smoke suite."""

    model: str | None = None
    """The GPU model each host has (A100, H100, H200, L40S...): the smoke tests' expectations."""
    count: Annotated[int, Field(ge=0)] | None = None
    """How many GPUs each host has."""
    hourly_cost: HourlyCost | None = None
    """What an hour of these GPUs costs, to rank GPU types by measured work per cost."""

    @model_validator(mode="after")
    def _host_price_needs_count(self) -> Gpus:
        if self.hourly_cost is not None and self.hourly_cost.per == "host" and not self.count:
            raise ValueError(
                "hourly_cost.per: host needs gpus.count, to give the price of one GPU; "
                "set gpus.count, or give the price per GPU (per: gpu)"
            )
        return self


if TYPE_CHECKING:
    SmokeTest = str
else:  # the suite's tests as gpunode.components declares them
    SmokeTest = Literal[SUITE_TESTS]


ContainerImage = Annotated[
    str,
    StringConstraints(
        pattern=r"\A[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?\Z"
    ),
]
"""An image reference: registry/name[:tag][@sha256:digest], not an option."""


Runtime = Literal["docker", "containerd"]


class Containers(Strict):
    """NVIDIA's container toolkit, wired into the container runtimes the host has."""

    runtime: list[Runtime] = Field(default_factory=lambda: list[Runtime](["docker"]))
    """The runtimes to configure (`nvidia-ctk runtime configure`), each where installed."""
    cdi: bool = True
    """Write the CDI spec /etc/cdi/nvidia.yaml (again after a driver change)."""
    version: PackageSpec | None = None
    """The toolkit's version: a series ("1.17": an installed one is kept, else the newest)
    or an exact Debian version ("1.17.8-1"); none: any, the newest when installing."""
    update: Literal["keep", "latest"] = "keep"
    """latest: move an installed toolkit to the newest the repository has (of `version`)."""
    hold: bool = True
    """apt-mark hold the toolkit's packages."""
    image: ContainerImage | None = None
    """A CUDA image the smoke test runs `nvidia-smi -L` in, if the host already has it
    (nothing is pulled); none: the smoke test lists the CDI devices instead."""

    @field_validator("runtime", mode="before")
    @classmethod
    def _one_runtime(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _latest_moves(self) -> Containers:
        if self.version is not None and "-" in self.version and self.update == "latest":
            raise ValueError("update: latest moves a series; an exact version cannot move")
        return self


def _spec_alone_schema(schema: dict[str, Any]) -> None:
    """Editors accept `tensorrt: "10.13"` as the loader does: a spec alone, short for
    `{version: "10.13"}`."""
    spec = {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)*(-[0-9A-Za-z][0-9A-Za-z.+~]*)?$"}
    schema.setdefault("anyOf", []).insert(0, spec)


class Package(Strict):
    """A package component from NVIDIA's repository: a version spec alone is short for
    `{version: ...}` (`cudnn: "9.10"`)."""

    version: PackageSpec
    """A series ("9", "9.10": an installed one is kept, else the newest the repository has
    for the default toolkit's CUDA) or an exact Debian version ("9.14.0.64-1",
    "2.26.2-1+cuda12.8")."""
    update: Literal["keep", "latest"] = "keep"
    """latest: move an installed version to the newest of `version` in the repository."""
    hold: bool = True
    """apt-mark hold its runtime libraries (frameworks are built against their exact
    version), so an unattended upgrade cannot move them."""

    @model_validator(mode="before")
    @classmethod
    def _spec_alone(cls, data: object) -> object:
        return {"version": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _latest_moves(self) -> Package:
        if "-" in self.version and self.update == "latest":
            raise ValueError("update: latest moves a series; an exact version cannot move")
        return self


class TensorRT(Package):
    """NVIDIA TensorRT from NVIDIA's CUDA repository, the build for the default toolkit's
    CUDA major; `tensorrt: "10.13"` is short for `tensorrt: {version: "10.13"}`."""

    version: PackageSpec
    """A series ("10", "10.13", "10.13.3.9": an installed one is kept, else the newest the
    repository has for the default toolkit's CUDA) or an exact Debian version
    ("10.13.3.9-1+cuda13.0")."""
    python: bool = True
    """The Python bindings for the system python3 (python3-libnvinfer, -lean, -dispatch)."""
    dev: bool = True
    """The headers, development libraries and trtexec (tensorrt-dev, libnvinfer-bin)."""


DCGM_SPEC = r"\A(4(\.[0-9]+)*|1:4(\.[0-9]+)+-[0-9A-Za-z.+~]+)\Z"
"""A DCGM 4 series or an exact Debian version, with NVIDIA's epoch ("1:4.5.2-1")."""


class Dcgm(Package):
    """NVIDIA DCGM 4 from NVIDIA's CUDA repository (datacenter-gpu-manager-4-cuda<major>,
    the build for the default toolkit's CUDA major, and its core) with its nvidia-dcgm
    service running; `dcgm: "4.5"` is short for `dcgm: {version: "4.5"}`."""

    version: Annotated[str, StringConstraints(pattern=DCGM_SPEC)] = "4"
    """A DCGM 4 series ("4", "4.5": an installed one is kept, else the newest the repository
    has) or an exact Debian version ("1:4.5.2-1")."""


NcclEnvValue = Annotated[str | int, AfterValidator(env_value)]
BinDir = Annotated[str, AfterValidator(bin_dir)]


class NcclExpect(Strict):
    transport: Literal["nvlink", "p2p", "shm", "ib", "socket"] | None = None
    """The transport NCCL should pick between the hosts (`ib`, `socket`) or within one
    (`nvlink`/`p2p`, `shm`); another one fails the test."""
    min_busbw_gbps: Annotated[float, Field(gt=0)] | None = None
    """The least bus bandwidth (GB/s, nccl-tests' busbw) of the largest all-reduce across
    the hosts; less fails the test."""


IFNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,14}")


def _interface_name(value: str) -> str:
    if not IFNAME.fullmatch(value):
        raise ValueError(
            "not a network interface name (as `ip link` shows it: eth0, ib0, bond0.100): "
            "letters, digits and `_ . : -`, at most 15"
        )
    return value


class NcclSettings(Strict):
    """`gpunode smoke --only nccl-multinode`: one torchrun per host of the run."""

    env: dict[EnvName, NcclEnvValue] = Field(default_factory=dict)
    """Environment of the host's torchrun (NCCL_SOCKET_IFNAME, NCCL_IB_HCA,
    CUDA_VISIBLE_DEVICES...): letters, digits and `_ . , : = / @ + ^ % -` only."""
    interface: Annotated[str, AfterValidator(_interface_name)] | None = None
    """The fabric interface the hosts meet on (ib0, eth0, bond0): NCCL's and gloo's
    bootstrap sockets bind to it (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME); default: a
    plain interface name in env's NCCL_SOCKET_IFNAME, else NCCL's and gloo's own pick."""
    local_addr: Address | None = None
    """The address the other hosts reach this one at (torchrun's --local-addr, set per host
    in host_vars/); default: torchrun's lookup of the host's name, which the others must
    resolve."""
    bin: BinDir | None = None
    """The folder of the `torchrun` to run (/opt/torch/.venv/bin); default: the bin/ of the
    stack's first conda env with pytorch, else `torchrun` on the host's PATH."""
    nproc_per_node: Annotated[int, Field(ge=1, le=64)] | None = None
    """Processes on this host; default: gpus.count, else 1."""
    sizes_mib: list[Annotated[int, Field(ge=1, le=16384)]] = Field(
        default_factory=lambda: [8, 64, 256, 1024], min_length=1, max_length=8
    )
    """All-reduce sizes in MiB; the largest is graded."""
    backend: Literal["nccl", "gloo"] = "nccl"
    """`gloo` all-reduces on the CPU: the orchestration alone, on hosts without GPUs."""
    timeout: Annotated[float, Field(gt=0, le=3600)] = 120.0
    """Seconds a host's torchrun may take, rendezvous included, before it is stopped."""
    expect: NcclExpect = Field(default_factory=NcclExpect)
    """What the run must show to pass: the transport and the least bus bandwidth."""

    @model_validator(mode="before")
    @classmethod
    def _no_fixed_rendezvous(cls, data: object) -> object:
        for key in ("rendezvous_host", "rendezvous_port"):
            if isinstance(data, dict) and key in data:
                raise ValueError(
                    f"{key} is gone: the rendezvous store listens on the first host's "
                    "loopback, on a fresh port each run, and the other hosts reach it through "
                    f"gpunode's own SSH connections; remove {key}"
                )
        return data

    @model_validator(mode="after")
    def _one_interface(self) -> NcclSettings:
        for key in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            value = self.env.get(key)
            if self.interface is not None and value is not None and value != self.interface:
                raise ValueError(
                    f"env.{key} ({value}) and interface ({self.interface}) disagree: "
                    "set interface alone"
                )
        return self

    @property
    def fabric(self) -> str | None:
        """The interface the bootstrap sockets bind to: `interface`, else env's
        NCCL_SOCKET_IFNAME when it names one interface (not a list or a `^` exclusion)."""
        if self.interface is not None:
            return self.interface
        named = str(self.env.get("NCCL_SOCKET_IFNAME", "")).lstrip("=")
        return named if IFNAME.fullmatch(named) else None


class Stack(Strict):
    driver: Driver | None = None
    """The NVIDIA driver; none: not managed."""
    cuda: Cuda | None = None
    """CUDA toolkits; none: not managed."""
    cudnn: Annotated[Package | None, Field(json_schema_extra=_spec_alone_schema)] = None
    """cuDNN, for the default toolkit's CUDA major (a version spec alone, or a mapping);
    none: not managed."""
    nccl: Annotated[Package | None, Field(json_schema_extra=_spec_alone_schema)] = None
    """NCCL, a build for the default toolkit (a version spec alone, or a mapping); none: not
    managed."""
    tensorrt: Annotated[TensorRT | None, Field(json_schema_extra=_spec_alone_schema)] = None
    """TensorRT, the build for the default toolkit's CUDA major (a version spec alone, or
    a mapping); none: not managed."""
    dcgm: Annotated[Dcgm | None, Field(json_schema_extra=_spec_alone_schema)] = None
    """NVIDIA DCGM and its nvidia-dcgm service, the build for the default toolkit's CUDA
    major (a version spec alone, or a mapping); none: not managed."""
    cuda_env: bool = False
    """Set CUDA_HOME, PATH and LD_LIBRARY_PATH for every login shell."""
    conda: Conda | None = None
    """Miniconda and its envs; none: not managed."""
    smoke: list[SmokeTest] = Field(default_factory=list)
    """GPU smoke tests run after every apply (and by `gpunode smoke`)."""
    containers: Containers | None = None
    """NVIDIA's container toolkit for docker/containerd; none: not managed."""
    roles: list[Name] = Field(default_factory=list)
    """Extra roles (built-in or from the inventory's own roles/ folder), run after the stack."""
    replace_builtin_roles: list[Name] = Field(default_factory=list)
    """Built-in roles that a folder of the same name in the inventory's roles/ replaces
    (`gpunode check` warns about each); without it, such a folder is not used."""
    vars: dict[str, str | int | float | bool | list[str]] = Field(default_factory=dict)
    """Variables for the extra roles' templates."""


SlurmConf = Annotated[str, StringConstraints(pattern=r"\A/[A-Za-z0-9._/-]+\Z", max_length=4096)]
SlurmNode = Annotated[str, StringConstraints(pattern=r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")]


class Slurm(Strict):
    """The Slurm controller `gpunode upgrade` drains and resumes this host's node through."""

    controller: Name = "local"
    """Where scontrol runs: `local` (this machine), or the name of an inventory host (over
    its connection)."""
    conf: SlurmConf | None = None
    """The slurm.conf scontrol reads there (SLURM_CONF); none: Slurm's default."""
    node: SlurmNode | None = None
    """This host's node name in Slurm; none: the host's name."""
    drain_timeout: float = Field(default=3600.0, gt=0)
    """Seconds to wait for the node's running jobs to end before giving up on the host."""


class Settings(Strict):
    """Everything that defaults, groups and hosts may set; later layers win."""

    connection: Literal["ssh", "local"] = "ssh"
    """ssh: over SSH to `address`. local: on the controller itself."""
    ssh: SshSettings = Field(default_factory=SshSettings)
    """How to reach the host over SSH."""
    become: Literal["sudo", "none"] = "sudo"
    """sudo: run changes as root through sudo. none: the login user is root."""
    become_password_env: EnvName | None = None
    """Name of an environment variable holding the sudo password (never the password)."""
    become_pty: bool = False
    """Run sudo on a terminal from the first command (sudoers' `Defaults requiretty`).
    Without it, a terminal is requested once sudo says it needs one."""
    repos: Repos = Field(default_factory=Repos)
    """Where packages and installers come from."""
    apt: AptSettings = Field(default_factory=AptSettings)
    """How apt and dpkg are run."""
    hooks: Hooks = Field(default_factory=Hooks)
    """Shell run on the host around a change that disrupts the GPUs (drain, resume)."""
    reboot: RebootSettings = Field(default_factory=RebootSettings)
    """How a reboot is waited for."""
    gpus: Gpus = Field(default_factory=Gpus)
    """The GPUs the host is expected to have."""
    stack: Stack = Field(default_factory=Stack)
    """The software the host should have."""
    nccl: NcclSettings = Field(default_factory=NcclSettings)
    """The cross-host all-reduce of `gpunode smoke --only nccl-multinode`."""
    slurm: Slurm | None = None
    """The host is a Slurm node: `gpunode upgrade` drains it before, resumes it after."""


class HostEntry(Settings):
    address: Address | None = None
    """The host's name or IP address to connect to."""


class GroupEntry(Settings):
    hosts: dict[Name, HostEntry | None] = Field(default_factory=dict)
    """The group's hosts by name, each with its own settings (or none)."""


class Document(Strict):
    name: Name | None = None
    """This inventory's name: run records are kept by it (else by the file's path), and the
    exporter's `inventory` label shows it. Two inventories with the same host names (staging
    and production) never share records while their names (or paths) differ."""
    defaults: Settings = Field(default_factory=Settings)
    """Settings for every host."""
    groups: dict[Name, GroupEntry | None] = Field(default_factory=dict)
    """Groups by name: their settings win over defaults; two groups of a host may not set
    one setting differently."""
    hosts: dict[Name, HostEntry | None] = Field(default_factory=dict)
    """Hosts by name: their settings win over their groups'."""


class Host(HostEntry):
    """One host's merged desired state."""

    name: Name
    groups: list[str] = Field(default_factory=list)

    def shape(self) -> str:
        """What the roles see of this host before its facts are known: hosts alike share
        it (the planner's walks before the facts, the remembered first ask)."""
        return self.model_dump_json(include={"stack", "repos", "gpus", "connection", "become"})

    # Cross-field rules run on the merged host only: a layer may set half of a pair.
    @model_validator(mode="after")
    def _reachable(self) -> Host:
        if self.connection == "ssh" and not self.address:
            raise ValueError("an ssh host needs an address: set `address:` or `connection: local`")
        if self.ssh.options and self.ssh.transport != "openssh":
            raise ValueError("ssh.options are passed to OpenSSH: set ssh.transport: openssh")
        return self

    @field_validator("repos")
    @classmethod
    def _repos_are_trusted(cls, repos: Repos) -> Repos:
        urls = {k: getattr(repos, k) for k in ("nvidia", "conda_installer", "pytorch_index",
                                               "pypi_index", "nvidia_container")}  # fmt: skip
        for key, url in urls.items():
            if url and url.startswith("http://") and not repos.insecure_http:
                raise ValueError(
                    f"{key} uses http://: gpunode installs what it fetches as root, so it "
                    "must be https (or set repos.insecure_http: true, for a closed lab only)"
                )
        if (
            repos.conda_installer != CONDA_INSTALLER
            and repos.conda_installer_sha256 == CONDA_INSTALLER_SHA256
        ):
            raise ValueError(
                "conda_installer is not the default installer: set conda_installer_sha256 "
                "to its sha256 (gpunode runs it as root)"
            )
        return repos

    @field_validator("stack")
    @classmethod
    def _default_toolkit_is_installed(cls, stack: Stack) -> Stack:
        cuda = stack.cuda
        if cuda is not None and cuda.default is not None and cuda.default not in cuda.toolkits:
            raise ValueError(
                f"cuda.default {cuda.default!r} is not in cuda.toolkits {cuda.toolkits}: "
                "add it to toolkits or pick one of them"
            )
        return stack

    @property
    def target(self) -> str:
        if self.connection == "local":
            return "localhost"
        host = f"[{self.address}]" if self.address and ":" in self.address else self.address
        return f"{host}:{self.ssh.port}"
