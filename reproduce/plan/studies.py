"""The paper's studies as sets of checkpoints: what `make reproduce FIGURE=N` / `TABLE=N` must train.

A study is the checkpoints one group of figures and tables looks up (by released name, paper
Section 3), e.g. Figure 4 and Tables 6-9 need the 610M MLM-40 and CLM runs exported at 1k-40k steps
and at the end. Every checkpoint is mapped to the pretraining run that produces it through
`pretraining.registry` (no second list of runs here), so a figure's pipeline is: train the runs
(CPT bases before their CPT runs), fine-tune every checkpoint, aggregate, draw and tabulate.

At toy scale a checkpoint is renamed with the toy size and every step count divided by 1,000
(`610m-clm-dec42k-mlm40-44k` -> `toy_m-clm-dec42-mlm40-44`): the run records carry honest
names, and `Checkpoint.paper_name` says which paper checkpoint the toy run stands in for when the
figures and tables are drawn in the paper's layout. Pure logic: no trainer, no drawing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from contracts.description import PretrainingDescription
from contracts.model_names import (
    biphasic_name,
    cpt_name,
    format_model_name,
    objective_token,
    parse_model_name,
    single_objective_name,
)
from contracts.paper import (
    BIPHASIC_SPLITS,
    CLM_STEPS_BEFORE_MASKING,
    CPT_STEPS,
    INTERMEDIATE_STEPS,
    MASKING_RATIOS,
    PAPER_SIZES,
    PRETRAIN_STEPS,
    TOY_SIZE,
)


class StudyError(ValueError):
    """A figure or table that no study reproduces, or a checkpoint outside the study."""


@dataclass(frozen=True)
class Study:
    name: str  # also the output folder: outputs/<name>
    title: str
    figures: tuple[int, ...]  # drawn from our runs (and, where the paper has the numbers, from the paper)
    tables: tuple[int, ...]
    checkpoints: tuple[str, ...]  # paper names, in the order they are trained and fine-tuned


def _masking() -> tuple[str, ...]:
    objectives = [objective_token(r) for r in MASKING_RATIOS] + ["clm"]
    return tuple(single_objective_name(size, obj) for size in PAPER_SIZES for obj in objectives)


def _data_efficiency() -> tuple[str, ...]:
    return tuple(
        single_objective_name("610m", obj, PRETRAIN_STEPS, step)
        for obj in ("mlm40", "clm")
        for step in (*INTERMEDIATE_STEPS, PRETRAIN_STEPS)
    )


def _biphasic() -> tuple[str, ...]:
    return tuple(biphasic_name("610m", clm, budget) for budget, splits in BIPHASIC_SPLITS.items() for clm in splits)


def _masking_after_clm() -> tuple[str, ...]:
    ratios = [objective_token(r) for r in MASKING_RATIOS]
    return tuple(
        [single_objective_name("610m", r) for r in ratios]
        + [biphasic_name("610m", CLM_STEPS_BEFORE_MASKING, PRETRAIN_STEPS, r) for r in ratios]
    )


def _cpt() -> tuple[str, ...]:
    return tuple(cpt_name(base, steps) for base in ("clm", "mlm40") for steps in (0, *CPT_STEPS))


STUDIES: dict[str, Study] = {
    s.name: s
    for s in (
        Study("masking", "masking ratio and objective at 42k steps, three sizes", (2, 3, 5), (2, 3, 4, 5), _masking()),
        Study("data-efficiency", "610M MLM-40 vs CLM along pretraining", (4, 10), (6, 7, 8, 9), _data_efficiency()),
        Study("biphasic", "610M CLM then MLM-40 at 12k/22k/42k budgets", (6,), (10, 11, 12, 13), _biphasic()),
        Study(
            "masking-after-clm", "610M masking ratio after 40k CLM steps vs MLM only", (7,), (), _masking_after_clm()
        ),
        Study(
            "cpt",
            "610M MLM-40 continued pretraining from decayed CLM and MLM bases",
            (8, 9, 12),
            (14, 15, 16, 17),
            _cpt(),
        ),
    )
}
# What a user may ask for that no study reproduces, and why (one line each).
NOT_REPRODUCIBLE = {
    ("figure", 1): "Figure 1 is not one of the paper's result figures (Figures 2-12): nothing to reproduce",
    ("figure", 11): "Figure 11 needs a 1B 25/75 biphasic model that the paper did not release and the registry "
    "does not know (its MLM-40 and CLM endpoints are in `make reproduce FIGURE=3`)",
    ("table", 1): "Table 1 lists the architecture and training settings: `python -m pretraining configs` writes "
    "them as run configs",
}


def study_for(figure: int | None = None, table: int | None = None) -> Study:
    """The study that draws `figure` or fills `table`; a one-line error for anything else."""
    if (figure is None) == (table is None):
        raise StudyError("give one of figure or table")
    kind, number = ("figure", figure) if figure is not None else ("table", table)
    for study in STUDIES.values():
        if number in (study.figures if kind == "figure" else study.tables):
            return study
    if (kind, number) in NOT_REPRODUCIBLE:
        raise StudyError(NOT_REPRODUCIBLE[(kind, number)])
    known = sorted({n for s in STUDIES.values() for n in (s.figures if kind == "figure" else s.tables)})
    raise StudyError(f"{kind} {number} is not in the paper's reproducible {kind}s {known}")


def targets() -> list[str]:
    """Every `make reproduce` target, e.g. 'FIGURE=4 (data-efficiency)'."""
    return [
        f"{kind.upper()}={n} ({s.name})"
        for s in STUDIES.values()
        for kind, numbers in (("figure", s.figures), ("table", s.tables))
        for n in numbers
    ]


# --- scale -----------------------------------------------------------------------------------------
def scale_steps(steps: int, scale: str, length_42k: int | None = None) -> int:
    """A paper step count at `scale` (the registry's rule: toy divides by 1,000); `length_42k`
    replaces the 42k length of a study's runs and every other step count keeps its share of it
    (the toy data-efficiency study: 5k of 42k -> 119 of 1,000; the masking study has only 42k)."""
    from pretraining import registry

    if length_42k is not None:
        return length_42k if steps == PRETRAIN_STEPS else max(1, round(steps * length_42k / PRETRAIN_STEPS))
    return registry.scale_steps(steps, scale)


class NameBook:
    """The release-style names one plan looks up (contracts.model_names), each parsed once: the
    plan's builder hands one book to every lookup (issue 79: the same names were parsed 2,340
    times while one toy Figure 3 was planned, submitted and read)."""

    def __init__(self):
        self._parsed: dict[str, PretrainingDescription | None] = {}

    def parse(self, name: str) -> PretrainingDescription | None:
        if name not in self._parsed:
            self._parsed[name] = parse_model_name(name)
        return self._parsed[name]

    def described(self, name: str) -> PretrainingDescription:
        desc = self.parse(name)
        if desc is None:
            raise StudyError(f"{name!r} is not a release-style checkpoint name")
        return desc


def scaled_description(desc: PretrainingDescription, scale: str, length_42k: int | None = None):
    """The description of a paper checkpoint at `scale`: the toy size, every step count scaled
    (`scale_steps`); unchanged at paper scale."""
    if scale == "paper" and length_42k is None:
        return desc
    s = lambda n: scale_steps(n, scale, length_42k)  # noqa: E731
    base = desc.checkpoint_step - desc.cpt_steps
    cpt = s(desc.checkpoint_step) - s(base) if desc.objective == "cpt" else 0
    scaled = replace(
        desc,
        size=TOY_SIZE.get(desc.size, desc.size) if scale == "toy" else desc.size,
        clm_steps=s(desc.clm_steps) if desc.clm_steps else 0,
        mlm_steps=s(desc.mlm_steps) if desc.mlm_steps else 0,
        cpt_steps=cpt,
        schedule_steps=s(desc.schedule_steps),
        checkpoint_step=s(desc.checkpoint_step),
    )
    if desc.objective in ("mlm", "clm"):  # as the scaled name reads: decayed at its schedule's end
        scaled = replace(scaled, decayed=scaled.checkpoint_step == scaled.schedule_steps)
    return scaled


def scaled_name(paper_name: str, scale: str, length_42k: int | None = None, book: NameBook | None = None) -> str:
    """`610m-mlm40-42k-1000` -> `toy_m-mlm40-42-1` at toy scale (unchanged at paper scale)."""
    desc = (book or NameBook()).described(paper_name)
    if scale == "paper" and length_42k is None:
        return paper_name
    return format_model_name(scaled_description(desc, scale, length_42k))


@dataclass(frozen=True)
class Checkpoint:
    """One fine-tuned model: its name in our records, the paper checkpoint it is (or stands in for),
    and where it comes from: run `run_name` (registry run `run`), exported at step `step`."""

    name: str
    paper_name: str
    run: str  # registry run (paper name), e.g. 610m-mlm40-42k
    run_name: str  # its run directory name at this scale, e.g. toy_m-mlm40-42
    step: int
    description: PretrainingDescription  # what `name` says (its size and steps at this scale)
    paper_description: PretrainingDescription  # what `paper_name` says

    @property
    def size(self) -> str:
        return self.description.size


def at_size(paper_name: str, size: str, book: NameBook | None = None) -> str:
    """`610m-clm-42k-5000` -> `210m-clm-42k-5000`: a single-objective checkpoint at another paper size."""
    desc = (book or NameBook()).parse(paper_name)
    if desc is None or desc.objective not in ("mlm", "clm"):
        raise StudyError(f"{paper_name!r} is not a single-objective checkpoint: it has no other sizes")
    return format_model_name(replace(desc, size=size))


def _run_and_step(paper_name: str, book: NameBook):
    """(registry run, step) of a checkpoint; a single-objective checkpoint the paper did not release
    (an intermediate step at another size) is that size's run of the same objective at that step."""
    from pretraining.registry import released_checkpoints, run_for

    if paper_name in released_checkpoints():
        return run_for(paper_name)
    desc = book.parse(paper_name)
    if desc is not None and desc.objective in ("mlm", "clm"):
        objective = "clm" if desc.objective == "clm" else objective_token(desc.masking_ratio)
        final = single_objective_name(desc.size, objective, desc.schedule_steps)
        if final in released_checkpoints():
            return run_for(final)[0], desc.checkpoint_step
    return run_for(paper_name)  # its one-line error


def checkpoints(
    study: Study,
    scale: str,
    length_42k: int | None = None,
    only: tuple[str, ...] | None = None,
    sizes: tuple[str, ...] | None = None,
    book: NameBook | None = None,
) -> list[Checkpoint]:
    """The study's checkpoints at `scale`; `only`: a subset, by paper or scaled name; `sizes` (paper
    sizes): the study's single-size checkpoints at each of these sizes instead (data-efficiency)."""
    book = book or NameBook()
    names = study.checkpoints
    if sizes is not None:
        names = tuple(at_size(n, s, book) for s in sizes for n in study.checkpoints)
    out = []
    for paper_name in names:
        run, step = _run_and_step(paper_name, book)
        paper = book.described(paper_name)
        ours = scaled_description(paper, scale, length_42k)
        out.append(
            Checkpoint(
                paper_name if ours is paper else format_model_name(ours),
                paper_name,
                run.name,
                scaled_name(run.name, scale, length_42k, book),
                scale_steps(step, scale, length_42k),
                ours,
                paper,
            )
        )
    if only is not None:
        known = {c.paper_name for c in out} | {c.name for c in out}
        unknown = [n for n in only if n not in known]
        if unknown:
            raise StudyError(
                f"checkpoints {unknown} are not in study {study.name}: give some of {','.join(c.name for c in out)}"
            )
        out = [c for c in out if c.paper_name in only or c.name in only]
    return out


def runs_to_train(study_checkpoints: list[Checkpoint], cpt_recipe: str = "branches", scale: str = "paper") -> list[str]:
    """Registry runs (paper names) the checkpoints need, each CPT base before its CPT runs; under the
    `branches` recipe a decay branch after the main CPT run whose kept state it continues."""
    from pretraining.registry import RUNS, cpt_branch_of

    order: list[str] = []

    def need(run: str) -> None:
        base = RUNS[run].cpt_base
        if base is not None:
            need(base)
            if main := cpt_branch_of(RUNS[run], scale, cpt_recipe):
                need(main.name)
        if run not in order:
            order.append(run)

    for ckpt in study_checkpoints:
        need(ckpt.run)
    return order
