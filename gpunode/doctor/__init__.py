"""`gpunode doctor`: read each host (its facts and one extra probe) and report what is
wrong with its driver, GPUs and CUDA stack, each finding with its evidence and fix.

`rules.py` is the table of rules; the checks live by subject (`driver_checks`,
`gpu_checks`, `cuda_checks`); `probe.sh`/`probe.py` are the extra read; `gather.py` reads
every host.
"""
