"""`gpunode lab`: simulated Ubuntu GPU hosts on one Linux machine.

Each host is a real OpenSSH server in its own mount, PID, UTS and IPC namespace whose
root is an overlayfs copy-on-write layer over the machine's root. Only the GPU is fake.
"""
