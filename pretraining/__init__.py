"""pretraining stage of the MLM-vs-CLM reproducibility package.

Importing it registers the model type `mlmclm_llama` with transformers' Auto classes, so
`AutoModel.from_pretrained(exported_dir)` works without trust_remote_code (`import pretraining`);
without this package, an exported directory loads with `trust_remote_code=True` (docs/export.md).

The registration waits for transformers: it runs at once when transformers is already imported,
else as soon as it is (wrapt's post-import hooks). So `python -m pretraining --help` and the
commands that load no model import neither torch nor transformers (issue 77).
"""

import sys

import wrapt


def _register_now(modeling) -> None:
    modeling.register_auto_classes()


def _register_once_transformers_is_loaded(_transformers) -> None:
    modeling = sys.modules.get("pretraining.modeling")
    if modeling is not None and not hasattr(modeling, "register_auto_classes"):
        return  # modeling.py is importing transformers right now: its own hook registers when it is done
    from pretraining import modeling

    _register_now(modeling)


# The modeling hook first: when the transformers hook imports modeling.py, both run (registering
# twice is harmless: exist_ok).
wrapt.register_post_import_hook(_register_now, "pretraining.modeling")
wrapt.register_post_import_hook(_register_once_transformers_is_loaded, "transformers")
