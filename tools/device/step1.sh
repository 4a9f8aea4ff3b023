# Device step 1 (.dev/c1): keep this folder's part of the payload (stepc.sh), then print what the
# machine has: the GPU, the cores, memory and disk, and the versions of the image's packages that
# cudf, dask-cudf and XGBoost are installed against (--no-deps: cudf 26.08 asks for pandas < 3.0.4,
# pyarrow < 24, numba < 0.65, numba-cuda < 0.31, nvidia-nvjitlink >= 13.3).
set -u
bash "$(dirname "$0")/stepc.sh"; status=$?
nvidia-smi --query-gpu=index,pci.bus_id,name,memory.total,driver_version --format=csv,noheader
echo "cores $(nproc), $(free -g | awk '/^Mem:/ { print $2 " GiB memory" }'), /tmp: $(df -h /tmp | awk 'NR == 2 { print $4 " free" }'), $(xz --version | head -1)"
which java || echo "no java on the machine"
python3 - <<'PY'
import importlib.metadata as md
import sys

names = ["numpy", "pandas", "pyarrow", "numba", "numba-cuda", "cupy-cuda13x", "cuda-bindings", "cuda-core",
         "cuda-pathfinder", "cuda-toolkit", "nvidia-nvjitlink", "nvidia-cuda-nvrtc", "nvidia-cufile",
         "nvidia-nccl-cu13", "nvidia-ml-py", "scipy", "rich", "fsspec", "packaging", "cloudpickle", "toolz",
         "pyyaml", "msgpack", "psutil", "click", "jinja2", "sortedcontainers"]
found = []
for name in names:
    try:
        found.append(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        found.append(f"{name} MISSING")
print(sys.executable, sys.version.split()[0] + ":", ", ".join(found))
PY
exit $status
