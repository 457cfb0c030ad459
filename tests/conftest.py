"""Test-wide settings: everything offline and headless, as on CI (no hub, no display)."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Model code that tests load with trust_remote_code is copied into this session's own folder,
# not ~/.cache, where concurrent sessions with different code would overwrite each other's copies.
if "HF_MODULES_CACHE" not in os.environ:
    os.environ["HF_MODULES_CACHE"] = tempfile.mkdtemp(prefix="hf_modules_")
    atexit.register(shutil.rmtree, os.environ["HF_MODULES_CACHE"], ignore_errors=True)

# The local single-node Slurm cluster fixture (`local_slurm`), usable by tests in any folder.
pytest_plugins = ["tests.slurm.cluster"]
