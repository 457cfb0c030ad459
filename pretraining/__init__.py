"""pretraining stage of the MLM-vs-CLM reproducibility package.

Importing it registers the model type `mlmclm_llama` with transformers' Auto classes, so
`AutoModel.from_pretrained(exported_dir)` works without trust_remote_code (`import pretraining`);
without this package, an exported directory loads with `trust_remote_code=True` (docs/export.md).

The registration waits for transformers: it runs at once when transformers is already imported,
else as soon as it is (wrapt's post-import hook). So `python -m pretraining --help` and the
commands that load no model import neither torch nor transformers (issue 77).
"""

import wrapt


def _register(_transformers) -> None:
    from pretraining.modeling import register_auto_classes

    register_auto_classes()


wrapt.register_post_import_hook(_register, "transformers")
