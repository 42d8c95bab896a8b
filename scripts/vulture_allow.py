"""The dead-code check's reviewed exceptions (scripts/test.sh runs vulture; settings in
pyproject.toml's [tool.vulture]). Each name below is used where vulture cannot see it, and
says by what. Add one only with such a comment; remove code that nothing uses instead."""

# ruff: noqa: B018
from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# -- read by a framework or library, by name ------------------------------------------------
_.constant_time_bytes_eq  # paramiko.util's, replaced: transport/_paramiko.py (test_paramiko_mac.py)
_.default_map  # click: the context's option defaults (cli/__init__.py)
_.list_commands  # click.Group: the commands `--help` lists
_.format_commands  # click.Group: how `--help` shows them
_.param_hint  # click.BadParameter: the option its message names
_.default_flow_style  # ruamel.yaml's dumper setting
_.sort_base_mapping_type_on_output  # ruamel.yaml's dumper setting
_.visit_Concat  # Jinja's code generator calls it (roles/render.py's bounded sandbox)
_.intercepted_binops  # Jinja's SandboxedEnvironment reads it
_.code_generator_class  # Jinja's Environment reads it
_.bounded_join  # named by the generated template code (roles/render.py)
_.__self  # Jinja's sandbox calls with it (a positional-only name)
_.missing_host_key  # paramiko's MissingHostKeyPolicy interface
_.max_length  # zlib's decompressobj signature (repoindex/decompress.py's protocol)
_.numMetrics  # NVML's ctypes structure fields, written for the C call
_.sample1  # NVML's ctypes structure field
_.sample2  # NVML's ctypes structure field
_.metricId  # NVML's ctypes structure field
_.allow_tf32  # torch's backend switches, set for the smoke test (torch reads them)
_.fixed_columns  # Textual's DataTable reads it
_.linkname  # tarfile's TarInfo field, written for the .deb's members
_.external_attr  # zipfile's ZipInfo field, written for the wheel's files
_.compress_type  # zipfile's ZipInfo field
_.list_directory  # http.server's SimpleHTTPRequestHandler calls it (mirror/serve.py)
_.log_request  # http.server calls it (gpunode_lab/supervisor.py's access log)
_.copyfile  # http.server's SimpleHTTPRequestHandler calls it (the access log's bytes)
_.find_class  # pickle's Unpickler calls it (diskmemo.py's restricted loader)

# -- fields of models and results, read by name (JSON, templates, schemas) ------------------
_.ssh_transport  # gpunode.toml setting (cli/settings.py reads the model's fields by name)
_.allow_ssh_commands  # gpunode.toml setting
_.allow_file_dirs  # gpunode.toml setting
_.vendor_id  # HostFacts field: in `facts --json` and docs/schemas/facts.json
_.cdi_driver  # HostFacts field: in `facts --json`
_.before_disrupt  # inventory hook: rendered through HostPlan.hook("before_disrupt")
_.cuda_keyring_sha256  # inventory field: read by the nvidia_repo role's template
_.pytorch_index  # inventory field: read by the conda role's template
_.pypi_index  # inventory field: read by the conda role's template
_.nvidia_container_key_fingerprint  # inventory field: read by the container_repo role
_.environment_file  # inventory field: read by name in CondaEnv._read_files
_.requirements_file  # inventory field: read by name in CondaEnv._read_files
_.cdi  # inventory field: read by the container_toolkit role's template
_.drain_timeout  # inventory field: the rollout and the scheduler read it
_.round_trips  # HostResult field: in the run record and `apply --json` (asdict)
_.reboot_seconds  # HostResult field: in the run record (`gpunode report`)
_.wave  # event field: in `apply --json` (asdict) and the rollout view
_.bf16_tflops  # expectation and schema field: read by name from the smoke results
_.fp16_tflops  # smoke expectation field
_.tf32_tflops  # smoke expectation field
_.gpunode  # JSON envelope field (views/schemas.py)
_.schema_version  # JSON envelope field
_.measured_hosts  # `cost --json` field
_.pflop  # `cost --json` field
_.pip_packages  # CondaEnv property: the conda role's tasks.yaml reads it
_.env_files  # CondaSpec property: the conda role's tasks.yaml loops over it
_.smi_rc  # doctor's probe: nvidia-smi -q's exit status, parsed for the rules (none reads it yet)
_.by_field  # components.py's lookup by inventory field (#35.1 wires it; remove if it stays unused)
_.fabricmanager_held  # DriverNames field: tests/test_driver_route.py checks its pattern

# -- read by tests, benchmarks and tools ----------------------------------------------------
_.misses  # memo's cache_info(), as functools' (tests/test_memo.py)
_.maxsize  # memo's cache_info()
_.currsize  # memo's cache_info()
_.cache_info  # memo's functools-like interface (tests)
_.cache_clear  # memo's functools-like interface (tests)
_.providers  # repoindex: bench/hardware-tensorrt.sh and tests/repoindex
_.pick  # resolve/specs.py: tests/resolve/test_specs.py
_.channels_opened  # the SSH transports' channel count: tests/transport count sessions
_.cells_written  # the GPU view's redraw count: bench/tui_scale.py
_.sort_key  # the GPU view's sort: tests/tui/test_gpu_view.py
_.events_applied  # the live screen's count: tests/tui/test_run_view.py
_.required_paths  # gpunode_lab/skeleton.py: tests/lab/test_hosts.py
_.powered  # the lab supervisor's power state: tests/apply/test_faults_conda.py
_.install_command  # gpunode_lab/torchrun_standin.py: tests/smoke/test_multinode_lab.py

# -- top --json's GPU fields under schema 1's first names (views/top.py's TopGpu): a
# pydantic model's fields, written by name into the published schema and the JSON
_.mem_total
_.power_draw
_.power_limit
_.unattended  # a component's blacklist entries: roles/unattended_upgrades' template reads them
