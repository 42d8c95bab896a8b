"""The compatibility table: good and bad stacks, and the exact packages they mean."""

from __future__ import annotations

import textwrap

import pytest

from gpunode import compat
from gpunode.compat import check_host
from gpunode.inventory import loads
from gpunode.inventory.model import Driver


def _findings(stack_yaml: str, gpus: str = "{}") -> list[str]:
    text = (
        "defaults:\n  gpus: "
        + gpus
        + "\n  stack:\n"
        + textwrap.indent(textwrap.dedent(stack_yaml).strip(), "    ")
        + "\nhosts:\n  h: {connection: local}\n"
    )
    inv = loads(text, "t.yaml")
    return [f.message for f in check_host(inv.hosts["h"])]


GOOD = [
    'driver: {branch: "550"}\ncuda: {toolkits: ["12.4"]}\ncudnn: "9"\nnccl: "2.21"',
    'driver: {branch: "570"}\ncuda: {toolkits: ["12.4", "12.8"], default: "12.8"}\nnccl: "2.25"',
    'driver: {branch: "580"}\ncuda: {toolkits: ["13.0"]}\ncudnn: "9"\nnccl: "2.28"',
    'driver: {branch: "590"}\ncuda: {toolkits: ["13.1"]}',
    'driver: {branch: "535"}\ncuda: {toolkits: ["11.8"]}\ncudnn: "8"\nnccl: "2.18"',
    'driver: {branch: "550"}\ncuda: {toolkits: ["12.4"]}\n'
    'conda: {tos: accept, envs: {t: {pytorch: "2.4.1"}, f: {tensorflow: "2.16.1"}}}',
    'driver: {branch: "580"}\nconda: {tos: accept, envs: {t: {pytorch: "2.11.0"}}}',
    'driver: {branch: "580"}\nconda: {tos: accept, envs: {t: {python: "3.14", pytorch: "2.11",'
    " torchvision: true, torchaudio: true}}}",
    'conda: {channels: [conda-forge], envs: {t: {python: "3.11"}}}',
    'driver: {branch: "570"}\nconda: {tos: accept, envs: {t: {pytorch: "2.7.1", torchvision: true,'
    " torchaudio: true}}}",
]


@pytest.mark.parametrize("stack", GOOD)
def test_good_stacks(stack: str) -> None:
    assert _findings(stack) == []


BAD = [
    (
        'driver: {branch: "550"}\ncuda: {toolkits: ["12.8"]}',
        "CUDA 12.8 needs driver >= 570.26 but branch 550 is requested: use branch >= 570, "
        "or CUDA <= 12.4",
    ),
    (
        'driver: {branch: "535"}\ncuda: {toolkits: ["13.0"]}',
        "CUDA 13.0 needs driver >= 580.65.06 but branch 535 is requested: use branch >= 580, "
        "or CUDA <= 12.2",
    ),
    (
        'driver: {version: "570.86.10"}\ncuda: {toolkits: ["13.0"]}',
        "CUDA 13.0 needs driver >= 580.65.06 but 570.86.10 is requested: use branch >= 580",
    ),
    ('cuda: {toolkits: ["12.7"]}', "unknown CUDA toolkit '12.7': known toolkits are 11.8"),
    (
        'cuda: {toolkits: ["13.0"]}\ncudnn: "8"',
        'cuDNN 8 has no packages for CUDA 13.0: use cudnn: "9"',
    ),
    ('nccl: "2.21"', "NCCL builds follow the CUDA toolkit"),
    ('cudnn: "9"\nnccl: "2.21"\ndcgm: {}', "cuDNN, NCCL and DCGM builds follow the CUDA toolkit"),
    (
        'driver: {branch: "550"}\nconda: {tos: accept, envs: {t: {pytorch: "2.11.0"}}}',
        "PyTorch 2.11.0 wheels (cu126, cu128, cu130) need driver >= 560.28.03, but branch 550",
    ),
    ('conda: {tos: accept, envs: {t: {pytorch: "1.13.1"}}}', "unknown PyTorch release '1.13.1'"),
    ("conda: {tos: accept, envs: {t: {torchvision: true}}}", "torchvision follows the env's"),
    (
        'driver: {branch: "580"}\n'
        'conda: {tos: accept, envs: {t: {pytorch: "2.7.9", torchvision: true}}}',
        "PyTorch 2.7.9 is not a release: 2.7 has 2.7.0, 2.7.1 (pip would find no such torch, "
        'nor a torchvision for it): use pytorch: "2.7.1"',
    ),
    (
        'driver: {branch: "580"}\n'
        'conda: {tos: accept, envs: {t: {python: "3.14", pytorch: "2.7.1"}}}',
        'PyTorch 2.7 has wheels for Python 3.9 to 3.13, not 3.14: use python: "3.13", or a '
        'PyTorch with wheels for it (pytorch: "2.9" or newer)',
    ),
    (
        'driver: {branch: "580"}\n'
        'conda: {tos: accept, envs: {t: {python: "3.8", pytorch: "2.11.0"}}}',
        'PyTorch 2.11 has wheels for Python 3.10 to 3.14, not 3.8: use python: "3.10"',
    ),
    (
        'conda: {envs: {t: {python: "3.11"}}}',
        "the channels https://repo.anaconda.com/pkgs/main, https://repo.anaconda.com/pkgs/r "
        "need Anaconda's Terms of Service accepted, and conda stops a non-interactive run until"
        " they are: set conda.tos: accept to accept them, or conda.channels: [conda-forge]",
    ),
    (
        'conda: {channels: [conda-forge, defaults], envs: {t: {python: "3.11"}}}',
        "the channels https://repo.anaconda.com/pkgs/main, https://repo.anaconda.com/pkgs/r need",
    ),
    (
        'driver: {branch: "535"}\nconda: {tos: accept, envs: {t: {tensorflow: "2.18.0"}}}',
        "TensorFlow 2.18.0 is built for CUDA 12.5, which needs driver >= 555.42.02",
    ),
]


@pytest.mark.parametrize(("stack", "message"), BAD)
def test_bad_stacks(stack: str, message: str) -> None:
    found = _findings(stack)
    assert len(found) == 1, found
    assert found[0].startswith(message)


def test_open_modules_need_turing() -> None:
    stack = 'driver: {branch: "550", flavor: open}'
    assert _findings(stack, "{model: Tesla V100-SXM2-32GB}") == [
        "open kernel modules need Turing or newer, and Tesla V100-SXM2-32GB is volta: "
        "use flavor: proprietary"
    ]
    assert _findings(stack, "{model: NVIDIA H200}") == []
    assert _findings('driver: {branch: "550", flavor: proprietary}', "{model: V100}") == []


def _names(**driver: object) -> compat.DriverNames:
    return compat.driver_names(Driver.model_validate(driver))


def test_package_names() -> None:
    versioned = _names(branch="550", flavor="open")
    assert versioned.install == ("nvidia-open-550", "libnvidia-compute-550")
    assert _names(branch="570", flavor="proprietary").release == "cuda-drivers-570"
    # From 590 the names drop the branch, and a pinning package holds it.
    unversioned = _names(branch="590", flavor="open")
    assert unversioned.install == ("nvidia-driver-pinning-590", "nvidia-open", "libnvidia-compute")
    assert (unversioned.release, unversioned.userspace) == ("nvidia-open", "libnvidia-compute")
    assert _names(branch="580").userspace == "libnvidia-compute-580"
    assert _names(branch="580").fabricmanager == "nvidia-fabricmanager-580"
    assert unversioned.fabricmanager == "nvidia-fabricmanager"
    assert compat.toolkit_package("12.4") == "cuda-toolkit-12-4"
    assert compat.toolkit_package("13.0") == "cuda-toolkit-13-0"


def test_cudnn_names_follow_the_cuda_major() -> None:
    assert compat.cudnn_names("9", "12.4") == ("libcudnn9-cuda-12", "libcudnn9-dev-cuda-12")
    assert compat.cudnn_names("9.10", "13.0") == ("libcudnn9-cuda-13", "libcudnn9-dev-cuda-13")
    assert compat.cudnn_names("8.9.7.29-1+cuda12.2", "12.4") == ("libcudnn8", "libcudnn8-dev")
    assert compat.cudnn_names("8", "13.0") is None


def test_rules_hold_no_release_pins() -> None:
    """Which releases exist is the repository's to say: a branch, cuDNN or NCCL published
    tomorrow must need no edit of gpunode."""
    data = compat.rules.rules()
    assert not {"driver_releases", "cudnn", "nccl_builds"} & set(data)
    assert _findings('driver: {branch: "595"}') == []  # a branch the rules never heard of


@pytest.mark.parametrize(
    ("torch", "cuda", "branch", "variant"),
    [
        ("2.4.1", "12.4", "550", "cu124"),
        ("2.4.1", "12.2", "535", "cu121"),
        ("2.4.1", "11.8", "535", "cu118"),
        ("2.11.0", "13.0", "580", "cu130"),
        ("2.11.0", "12.8", "570", "cu128"),
        ("2.11.0", None, "560", "cu126"),
        ("2.7.1", "12.9", "575", "cu128"),
        ("2.11.0", None, "535", None),
    ],
)
def test_torch_variant(torch: str, cuda: str | None, branch: str, variant: str | None) -> None:
    assert compat.torch_variant(torch, cuda, branch) == variant


def test_every_rule_table_cites_a_source() -> None:
    from pathlib import Path

    text = Path(compat.rules.__file__).with_name("rules.yaml").read_text()
    tables = [line.split(":")[0] for line in text.splitlines() if line and line[0].isalpha()]
    for table in tables:
        before = text[: text.index(f"\n{table}:")]
        comment = before[before.rstrip().rfind("\n\n") :]
        assert "http" in comment or "Source" in comment, f"{table} has no cited source"


def test_every_model_gpunode_names_elsewhere_is_a_known_model() -> None:
    """The smoke table's models and the lab's are models `check` accepts."""
    from gpunode.smoke.expected import SPECS
    from gpunode_lab.gpumodels import MODELS

    names = [s.name for s in SPECS] + list(MODELS) + ["NVIDIA H100 80GB HBM3", "Tesla T4"]
    assert [n for n in names if compat.rules.gpu_arch(n) is None] == []
    assert compat.rules.gpu_arch("H1OO") is None


def test_every_pytorch_minor_has_its_releases_and_pythons() -> None:
    """A minor with wheel variants but no releases or Python range would refuse every env."""
    for minor in compat.rules.rules()["torch_variants"]:
        assert compat.rules.torch_releases(minor), minor
        assert compat.rules.torch_python(minor), minor
    assert compat.rules.torch_releases("2.7.9") == ["2.7.0", "2.7.1"]
    assert compat.rules.torch_for_python("3.14") == "2.9"
