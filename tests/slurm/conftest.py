"""Makes the local Slurm cluster fixture available here even before tests/conftest.py registers
tests.slurm.cluster as a plugin (the module keeps a single cluster per session either way)."""

from tests.slurm.cluster import local_slurm  # noqa: F401  (re-exported fixture)
