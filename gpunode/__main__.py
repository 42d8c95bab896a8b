from gpunode.cli import run

run()
