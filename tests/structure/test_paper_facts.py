"""Each paper fact is stated once (contracts.paper; the checkpoint-name grammar in contracts.model_names,
the run-directory layout in contracts.layout) and imported everywhere else: its literal appears in no
other source module. The literals searched for are taken from the home modules themselves."""

import ast

import pytest

from contracts import layout, paper
from tests.structure.test_import_graph import ROOT, STAGES

HOMES = {"contracts/paper.py", "contracts/model_names.py", "contracts/layout.py"}
# Copied verbatim into every exported checkpoint as its remote code (docs/export.md), so it may import
# nothing of ours; its config defaults are the 210M shape, checked against contracts.paper below.
STANDALONE_MODEL_CODE = "pretraining/modeling.py"


def _numbers() -> dict[float, str]:
    facts = [(shape.hidden, f"hidden size of {size}") for size, shape in paper.PAPER_SHAPES.items()]
    facts += [(shape.ffn, f"FFN size of {size}") for size, shape in paper.PAPER_SHAPES.items()]
    facts += [
        (getattr(paper, name), name)
        for name in (
            "PRETRAIN_STEPS",
            "CLM_STEPS_BEFORE_MASKING",
            "VOCAB_SIZE",
            "TOKENS_PER_STEP_TABLE1",
            "TOKENS_PER_STEP_TEXT",
            "PRETRAIN_BATCH_SEQUENCES",
        )
    ]
    found = {}
    for value, label in facts:
        if value & (value - 1) == 0:  # a power of two (610M's FFN 4096) is also a common block size
            continue
        found[value] = f"{found[value]}, {label}" if value in found else label
    return found


def _sequences() -> dict[tuple, str]:
    found = {
        paper.INTERMEDIATE_STEPS: "INTERMEDIATE_STEPS",
        paper.MASKING_RATIOS: "MASKING_RATIOS",
        tuple(round(r * 100) for r in paper.MASKING_RATIOS): "MASKING_RATIOS in percent",
        paper.CPT_STEPS: "CPT_STEPS",
        tuple(paper.BIPHASIC_SPLITS): "the biphasic budgets",
        paper.PAPER_SIZES: "PAPER_SIZES",
        paper.TOY_SIZES: "TOY_SIZES",
        paper.FINETUNE_LRS: "FINETUNE_LRS",
    }
    for budget, splits in paper.BIPHASIC_SPLITS.items():
        found[splits] = f"the biphasic splits of {budget}"
    return found


LAYOUT_NAMES = {
    layout.RECORD_FILE,
    layout.LOSS_LOG_FILE,
    layout.FINISHED_FILE,
    layout.EXPORTS_DIR,
    layout.LATEST_CHECKPOINT_PATTERN.format(rank=0),
}
# Pieces of checkpoint names and export folders that only the grammar and the layout build.
NAME_BUILDING = ("mlm", "-dec", "step-")


def _sources():
    for stage in (*STAGES, "container"):
        for path in sorted((ROOT / stage).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative not in HOMES and relative != STANDALONE_MODEL_CODE:
                yield relative, ast.parse(path.read_text(), relative)


def find_fact_literals(tree: ast.AST, numbers=None, sequences=None) -> list[str]:
    numbers = _numbers() if numbers is None else numbers
    sequences = _sequences() if sequences is None else sequences
    hits = []
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value in numbers:
            hits.append(f"{where}: {node.value} ({numbers[node.value]})")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in LAYOUT_NAMES:
            hits.append(f"{where}: {node.value!r} (contracts.layout)")
        elif isinstance(node, (ast.Tuple, ast.List)):
            try:
                value = tuple(ast.literal_eval(node))
            except ValueError:
                continue
            if all(isinstance(item, (int, float, str)) for item in value) and value in sequences:
                hits.append(f"{where}: {value} ({sequences[value]})")
        elif isinstance(node, ast.JoinedStr):  # f"...mlm{ratio}..." builds a checkpoint name
            for part, following in zip(node.values, node.values[1:]):
                if (
                    isinstance(part, ast.Constant)
                    and isinstance(following, ast.FormattedValue)
                    and part.value.endswith(NAME_BUILDING)
                ):
                    hits.append(f"{where}: f-string {part.value!r}{{...}} (contracts.model_names / layout)")
    return hits


def test_no_paper_fact_is_written_outside_its_home():
    hits = [f"{name} {hit}" for name, tree in _sources() for hit in find_fact_literals(tree)]
    assert hits == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ("steps = (1_000, 2_000, 5_000, 10_000, 20_000, 40_000)", "INTERMEDIATE_STEPS"),
        ("shape = dict(hidden=1152)", "hidden size of 610m"),
        ("name = f'610m-mlm{ratio}-42k'", "contracts.model_names"),
        ("path = run_dir / 'hf' / f'step-{n}'", "contracts.layout"),
        ("ratios = [20, 30, 40, 50]", "MASKING_RATIOS in percent"),
    ],
)
def test_the_search_finds_known_literals(source, expected):
    hits = find_fact_literals(ast.parse(source))
    assert hits and any(expected in hit for hit in hits), hits


def test_the_standalone_model_code_defaults_to_the_210m_shape():
    from pretraining.modeling import MlmClmConfig

    cfg, shape = MlmClmConfig(), paper.PAPER_SHAPES["210m"]
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers) == (shape.hidden, shape.ffn, shape.layers)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads) == (shape.heads, shape.kv_heads)
    assert (cfg.vocab_size, cfg.max_position_embeddings) == (paper.VOCAB_SIZE, paper.MAX_CONTEXT)
