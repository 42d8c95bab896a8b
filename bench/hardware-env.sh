# Sourced by bench/hardware-*.sh and bench/multinode-h200.sh, from the repository root:
# gpunode from this checkout on a GPU machine with no package index. gpunode's dependencies
# come as wheels from .whl/ (WHEELS=DIR for another folder; docs/hardware.md lists them),
# installed into /tmp/site; without wheels the python's own packages serve.
wheels=${WHEELS:-.whl}
if ls "$wheels"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$wheels"/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
