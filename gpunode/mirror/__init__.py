"""`gpunode mirror`: fetch once what a fleet's plans install.

`needs.py` reads and plans each selected host as `gpunode plan` does and collects, per
repository folder (NVIDIA's CUDA folder, libnvidia-container's), the exact versions its
plans install and their dependency closure, the Miniconda installer, the envs' `conda
create` specs and pip installs; `build.py` downloads those .debs (each checked against the
index's SHA256) and the folder's signed indexes, byte for byte, into the repository's own
layout, and writes the manifest the planner checks a mirror's completeness by;
`condachan.py` builds a local conda channel of the records conda's solver takes
(`condasolve.py`, py-rattler), `wheels.py` the pip indexes; `serve.py` serves the folder
read-only.
"""
