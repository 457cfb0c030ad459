"""pretraining stage of the MLM-vs-CLM reproducibility package.

Importing it registers the model type `mlmclm_llama` with transformers' Auto classes, so
`AutoModel.from_pretrained(exported_dir)` works without trust_remote_code (`import pretraining`);
without this package, an exported directory loads with `trust_remote_code=True` (docs/export.md).
"""

from pretraining.modeling import register_auto_classes

register_auto_classes()
