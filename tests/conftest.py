"""Test-wide settings: everything offline and headless, as on CI (no hub, no display)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The local single-node Slurm cluster fixture (`local_slurm`), usable by tests in any folder.
pytest_plugins = ["tests.slurm.cluster"]
