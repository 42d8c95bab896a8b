"""`gpunode mirror`: fetch once what a fleet's plans install from NVIDIA's repository.

`needs.py` reads and plans each selected host as `gpunode plan` does and collects, per
repository folder, the exact versions its plans install and their dependency closure;
`build.py` downloads those .debs (each checked against the index's SHA256) and the folder's
signed indexes, byte for byte, into the repository's own layout, and writes the manifest
the planner checks a mirror's completeness by; `serve.py` serves the folder read-only.
"""
