"""The study's figures drawn from our runs, each next to the published one (the analysis stage)."""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

from contracts.paper import MASKING_RATIOS, PAPER_SIZES, TOY_SIZE
from contracts.provenance import atomic_write_bytes
from reproduce.plan import ReproduceConfig, StudyPlan, data_dir, pretrain_length


def figure_files(plan: StudyPlan) -> list[str]:
    from paper_figures.cli import CELL_FIGURES

    names = []
    for number in plan.figures:
        names.append(f"figure{number}")
        if f"figure{number}" in CELL_FIGURES:  # the paper prints the numbers of these (not of 5, 7, 12)
            names.append(f"figure{number}_published")
    return names


def as_paper_records(plan: StudyPlan, records) -> list:
    """The records with each toy model renamed to the paper checkpoint it stands in for (and that
    checkpoint's pretraining description); other records unchanged."""
    from dataclasses import replace as replace_record

    paper = {c.name: c for c in plan.checkpoints if c.name != c.paper_name}
    return [
        replace_record(r, model=paper[r.model].paper_name, pretraining=paper[r.model].paper_description)
        if r.model in paper
        else r
        for r in records
    ]


def claims_report(plan: StudyPlan, records, folder: Path) -> str:
    """With replicated pretraining runs: the claims report on the records as paper checkpoints
    (`claims.md`, `claims.csv` in `folder`), its estimated pretraining SD per task type in one line."""
    from analysis.claims import evaluate_claims, inputs_from_records
    from analysis.claims.report import TOY_LABEL, TOY_TAG, pretraining_lines, write_claims_report

    cfg = plan.config
    source = f"{cfg.scale}-scale reproduction, {cfg.pretrain_replicates} pretraining runs per configuration"
    if cfg.scale == "toy":
        source += " (toy models under the names of the paper checkpoints they stand in for)"
    inputs = inputs_from_records(as_paper_records(plan, records), source, reps=cfg.reps)
    report = evaluate_claims(inputs, reps=cfg.reps)
    toy = cfg.scale == "toy"
    tag = TOY_TAG if toy else ""
    write_claims_report(
        report,
        csv=str(folder / "claims.csv"),
        markdown=str(folder / "claims.md"),
        reps=cfg.reps,
        label=TOY_LABEL if toy else None,
        tag=tag,
    )
    lines = [f"{tag} {line}".strip() for line in pretraining_lines(report)]
    return "; ".join(lines) or "no task type has 2 runs of one configuration"


def draw_figures(plan: StudyPlan, cells, records, folder: Path, sources: list[str], chance=None) -> list[str]:
    """The study's figures from our cells / records (toy runs drawn as the paper checkpoints they stand
    in for, and said so on the figure), each next to the published one where the paper has the numbers.
    `chance` (reproduce.local.chance_levels: one row per dataset, or a function returning them, called
    only once the other figures are drawn) is drawn on Figure 3 as the mean chance level of each task
    type. Returns one summary per figure."""
    from analysis.published import load_published_cells
    from paper_figures.cli import CELL_FIGURES, LOG_FIGURES, RUN_FIGURES
    from paper_figures.output import save_figure

    cfg = plan.config
    renamed = plan.stand_ins
    back = {paper: ours for ours, paper in renamed.items()}
    cells = cells.assign(model=cells["model"].map(lambda m: renamed.get(m, m)))
    records = as_paper_records(plan, records)
    paper_sizes = tuple(s for s in PAPER_SIZES if cfg.sizes is None or s in cfg.sizes or TOY_SIZE[s] in cfg.sizes)
    summaries = {}
    # Figures 3 and the toy 4, which may wait for `chance`, last
    for number in sorted(plan.figures, key=lambda n: n in (3, 4)):
        name, kwargs = f"figure{number}", {}
        if number in (2, 3):
            kwargs["sizes"] = paper_sizes
        if number == 3:
            kwargs["ratios"] = cfg.ratios or MASKING_RATIOS
            table = chance() if callable(chance) else chance
            if table is not None:
                kwargs["chance"] = table.groupby("task_type")["chance"].mean().to_dict()
            untrained = {r.size: r.name for r in plan.random_init}  # toy size -> model
            by_paper_size = {paper: untrained[toy] for paper, toy in TOY_SIZE.items() if toy in untrained}
            if by_paper_size:
                kwargs["random_init"] = by_paper_size
        if number == 5 and cfg.scale == "toy":  # the paper's [1e-5, 1e-4] holds at most one toy LR
            kwargs["lr_range"] = (min(cfg.lrs), max(cfg.lrs))
        if number == 4 and cfg.scale == "toy" and cfg.study == "data-efficiency":
            fig, points = _toy_figure_4(plan, cells, chance)
        elif name in LOG_FIGURES:  # our runs' training logs, under our names
            fig, points = LOG_FIGURES[name]([str(p) for p in plan.cpt_run_dirs])
        elif name in RUN_FIGURES:
            fig, points = RUN_FIGURES[name](records, **kwargs)
        else:
            fig, points = CELL_FIGURES[name](cells, **kwargs)
        if renamed:
            label_stand_ins(plan, number, fig, points)
            # cells and records were renamed to paper names; Figure 12 reads our run folders directly
            points.insert(6, "stand_in_for", points["model"].map(lambda m: m if m in back else renamed.get(m)))
            points["model"] = points["model"].map(lambda m: back.get(m, m))
        value = "mean" if "mean" in points else "std"
        model_points = points[points["series"] != "chance"]  # chance rows are no model's
        drawn = int(model_points[value].notna().sum())
        save_figure(
            fig,
            points,
            folder,
            name,
            {"source": "runs", "runs": sources, "scale": cfg.scale, "study": cfg.study, "stand_ins": renamed, **kwargs},
        )
        summaries[number] = f"{name} {drawn}/{len(model_points)} points"
        if name in CELL_FIGURES:
            fig, published = CELL_FIGURES[name](load_published_cells())
            save_figure(fig, published, folder, f"{name}_published", {"source": "published"})
            _side_by_side(folder, name, "our toy runs" if renamed else "our runs")
    return [summaries[number] for number in plan.figures]


def _toy_figure_4(plan: StudyPlan, cells, chance):
    """The toy data-efficiency study's Figure 4 (paper_figures.data_efficiency): both sizes, the means
    of the pretraining runs (bars: half their range), the untrained models and the chance levels.
    `cells` are under the paper names (replicates `-rep<k>`), as draw_figures renamed them."""
    from analysis.claims.arc import replicate_mean_cells
    from contracts.steps import format_steps
    from paper_figures.data_efficiency import figure_4_sizes
    from paper_figures.from_cells import ERROR_BARS
    from reproduce.arc import arc_sentence
    from reproduce.plan import study_sizes

    cfg = plan.config
    chosen = [c for c in plan.checkpoints if "-rep" not in c.name]
    toy_steps = {c.paper_description.checkpoint_step: c.step for c in chosen}
    table = chance() if callable(chance) else chance
    untrained = {r.size: r.name for r in plan.random_init}
    runs = cfg.pretrain_replicates
    bars = (
        f"Bars: half the range of the {runs} pretraining runs of each point (not a confidence interval)."
        if runs > 1
        else ERROR_BARS
    )
    return figure_4_sizes(
        replicate_mean_cells(cells),
        sizes=study_sizes(cfg),
        steps=tuple(sorted(toy_steps)),
        step_labels={p: f"{format_steps(p)}\n({t})" for p, t in toy_steps.items()},
        random_init={paper: untrained[toy] for paper, toy in TOY_SIZE.items() if toy in untrained},
        chance=table.groupby("task_type")["chance"].mean().to_dict() if table is not None else None,
        bars=bars,
        bars_column="half_range" if runs > 1 else "ci_halfwidth",
        note=f"Each point: the mean of {runs} pretraining run(s) of {pretrain_length(cfg):,} toy steps; x: the "
        f"paper's step (the toy step in brackets). {arc_sentence(cells)} Intervals (with the pretraining SD) "
        "and the readings: claims/arc.md.",
    )


def label_stand_ins(plan: StudyPlan, number: int, fig, points) -> None:
    """Say on Figure `number` (fig, points: as drawn from our runs under the paper's names) that its
    runs stand in for the paper's checkpoints: one short title line, the details in the caption
    (drawn and in `points.attrs["caption"]`); stand_in_labels."""
    from paper_figures.plotting import extend_caption

    title, caption = stand_in_labels(plan, number)
    fig.suptitle(f"{fig.get_suptitle()}\n{title}", fontsize=11)
    extend_caption(fig, points, caption)


def stand_in_labels(plan: StudyPlan, number: int) -> tuple[str, str]:
    """For a figure (Figure `number`) drawing runs under the names of the paper checkpoints they
    stand in for: one short suptitle line saying so, and the text added to its caption: which toy
    size stands in for which paper size, how many steps the runs took for the paper's, the toy world
    (toy_world_caption) and, on the toy masking study's Figure 3, why CLM leads there."""
    from contracts.paper import PRETRAIN_STEPS, TOY_STEP_DIVISOR
    from paper_figures.plotting import SIZE_LABELS

    cfg = plan.config
    toy = cfg.scale == "toy"
    length = pretrain_length(cfg)
    if length is not None:
        steps = f"the paper's {PRETRAIN_STEPS:,} pretraining steps are {length:,}{' toy' if toy else ''} steps"
        if cfg.study != "masking":  # (the masking study's only step count is 42k)
            steps += ", every other step count in proportion"
    else:
        steps = f"every paper step count divided by {TOY_STEP_DIVISOR:,}"
    runs = ("toy runs" if toy else "runs") + (f" of {length:,} steps" if length is not None else "")
    title = f"[{runs} standing in for the paper's checkpoints]"
    if not toy:
        return title, f"Runs drawn under the names of the paper checkpoints they stand in for: {steps}."
    renamed = plan.stand_ins
    sizes = [(t, p) for p, t in TOY_SIZE.items() if any(m.startswith(f"{t}-") for m in renamed)]
    world = toy_world_caption(cfg)
    which = ", ".join(f"{t} for {SIZE_LABELS.get(p, p)}" for t, p in sizes)
    text = (
        "Toy runs drawn under the names of the paper checkpoints they stand in for: "
        + (f"{which}; " if which else "")
        + f"{steps}. {world[0].upper()}{world[1:]}."
    )
    if cfg.study == "masking" and number == 3 and length is not None:
        text += (
            f" {length:,} toy steps are the early regime in which the paper finds CLM ahead (its Figure 4: CLM is "
            "more data-efficient in the early stages), hence the dashed CLM lines mostly above the MLM lines; "
            "`make reproduce FIGURE=4` draws the toy data-efficiency study, where MLM catches up."
        )
    return title, text


def toy_world_caption(cfg: ReproduceConfig) -> str:
    """What the toy runs were pretrained on, from the prepared data's manifest (docs/reproduce.md,
    "Toy learning"): one-topic pages in blocks split into two windows, and the share of a token's
    attention keys in its own document beside the FineWeb-Edu estimate."""
    from contracts.bounded import LARGE, read_json_object
    from pretraining.data.context import fineweb_edu_estimate
    from pretraining.data.prepare import MANIFEST

    path = data_dir(cfg) / MANIFEST
    if not path.is_file():
        return "toy world: one-topic pages, words, names and IR concepts held out of fine-tuning"
    manifest = read_json_object(path, LARGE)
    counts, context = manifest["counts"], manifest.get("context") or {}
    share = context.get("own_document_key_share")
    reference = fineweb_edu_estimate()["own_document_key_share"]
    return (
        f"toy world: one-topic pages of {counts['tokens'] / counts['documents']:.0f} tokens on average in "
        f"{manifest['seq_len']}-token blocks split into two windows"
        + (
            f", {100 * share:.0f}% of attention keys in the token's own document (FineWeb-Edu ~{100 * reference:.0f}%)"
            if share
            else ""
        )
        + "; evaluation words, names and IR concepts only pretraining shows"
    )


def _side_by_side(folder: Path, name: str, label: str) -> None:
    """<name>_vs_published.png: our figure (left) next to the published one (right)."""
    import matplotlib.image as mpimg
    from matplotlib.figure import Figure

    ours, paper = mpimg.imread(folder / f"{name}.png"), mpimg.imread(folder / f"{name}_published.png")
    fig = Figure(figsize=(22, 7.5), layout="constrained")
    for ax, image, title in zip(fig.subplots(1, 2), (ours, paper), (label, "published (the paper's tables)")):
        ax.imshow(image)
        ax.set_title(title)
        ax.axis("off")
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    atomic_write_bytes(folder / f"{name}_vs_published.png", buffer.getvalue())
