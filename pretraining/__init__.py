"""pretraining stage of the MLM-vs-CLM reproducibility package.

Importing it registers the model type `mlmclm_llama` with transformers' Auto classes, so
`AutoModel.from_pretrained(exported_dir)` works without trust_remote_code (`import pretraining`).
"""
from pretraining import modeling as _modeling  # noqa: F401  (registration side effect)
