"""`python -m reproduce --figure N | --table N [--scale toy|paper] [--slurm] ...`: the options -> a
ReproduceConfig, then the stages here (reproduce.local) or the Slurm jobs (reproduce.slurm)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contracts.config import ConfigError, config_from_dict
from contracts.provenance import utc_now
from reproduce.housekeeping import clean_checkpoints
from reproduce.local import STAGE_NAMES, reproduce
from reproduce.plan import (
    DEFAULT_LRS,
    DEFAULT_SEEDS,
    REDUCED,
    SCALE_DEFAULTS,
    TOY_DATA_EFFICIENCY_REPLICATES,
    TOY_DATA_EFFICIENCY_STEPS,
    TOY_PRETRAIN_STEPS,
    ReproduceConfig,
    ReproduceError,
)
from reproduce.plan.config import rescaled
from reproduce.plan.studies import STUDIES, StudyError, study_for
from reproduce.slurm import default_cluster_file, reproduce_slurm
from reproduce.workers import CURRENT_STAGE, Interrupted, interruptible


def _csv(kind):
    def parse(text: str):
        return tuple(kind(x.strip()) for x in text.split(",") if x.strip())

    return parse


def _yaml_mapping(text: str) -> dict:
    import yaml

    from contracts.bounded import YamlTooLarge, load_yaml, short_repr, yaml_problem

    try:
        value = load_yaml(text)
    except yaml.YAMLError as exc:
        raise argparse.ArgumentTypeError(f"not YAML ({yaml_problem(exc)})") from None
    except (YamlTooLarge, RecursionError) as exc:
        raise argparse.ArgumentTypeError(f"not a YAML mapping of settings ({exc or 'nested too deeply'})") from None
    if not isinstance(value, dict):
        shown = short_repr(text)
        raise argparse.ArgumentTypeError(f"expected a YAML mapping such as '{{tensorboard: {{}}}}', got {shown}")
    return value


def build_parser() -> argparse.ArgumentParser:
    studies = "; ".join(
        f"{s.name}: Figures {', '.join(map(str, s.figures))}"
        + (f", Tables {s.tables[0]}-{s.tables[-1]}" if s.tables else "")
        for s in STUDIES.values()
    )
    p = argparse.ArgumentParser(
        prog="python -m reproduce",
        description="Reproduce a figure or table end to end: prepare data, pretrain the models of its study "
        "(from pretraining.registry), fine-tune them on the 12 datasets, aggregate, draw its "
        "figures (next to the published ones), tabulate, audit. Toy scale runs here (cached: a "
        "rerun reuses finished runs and records; an interrupted run resumes); --slurm / --scale "
        f"paper writes Slurm jobs for a cluster. Studies: {studies}.",
        epilog="python -m reproduce status OUT: where the study in OUT stands (runs, losses, ETA, failures) "
        "and a PNG of its loss curves, read while it runs (docs/watching.md). python -m reproduce resubmit OUT "
        "[--dry-run]: submit again only the failed or missing jobs of a Slurm study (docs/cluster.md). "
        "python -m reproduce budget --gpu-hours H --out DIR: the masking-study design that decides the most "
        "claims for H GPU-hours (docs/reproduce.md).",
    )
    p.add_argument(
        "--clean",
        action="store_true",
        help="only remove the resume checkpoints (weights + optimizer state) of the finished pretraining runs "
        "of finished studies under --out or --out-root (make clean); exports, records, figures stay",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--figure", type=int, help="a figure number (default 3); its study is reproduced")
    which.add_argument("--table", type=int, help="a table number (2-17); its study is reproduced")
    p.add_argument("--scale", choices=["toy", "paper"], default=None, help="toy (default) or paper")
    p.add_argument("--out", help="output folder (created; reused on reruns; default OUT_ROOT/<study>)")
    p.add_argument("--out-root", default="outputs", help="where the default output folder goes (outputs)")
    p.add_argument(
        "--config",
        help="a reproduce.yaml written by an earlier invocation or by `reproduce budget` (replaces the options; "
        "with --scale of the other scale: the same design rescaled, in --out or <out>-<scale>)",
    )
    p.add_argument(
        "--stage",
        choices=["all", "data", "pretraining", "fine-tuning", "analysis"],
        default="all",
        help="run one stage only (here; the earlier stages must be finished)",
    )
    p.add_argument(
        "--reduced",
        action="store_true",
        help="CI mode of Figure 3: toy_s x (MLM-20, MLM-40, CLM) and its random initialisation, the toy defaults "
        "otherwise",
    )
    p.add_argument(
        "--checkpoints",
        type=_csv(str),
        help="a subset of the study's checkpoints, by paper name (610m-clm-42k-5000) or toy name",
    )
    p.add_argument(
        "--sizes",
        type=_csv(str),
        help="masking study: sizes (toy default toy_s,toy_m,toy_l; paper 210m,610m,1b); data-efficiency study "
        "(toy default toy_s,toy_m; paper 610m)",
    )
    p.add_argument("--ratios", type=_csv(float), help="masking study: masking ratios (default 0.2,0.3,0.4,0.5)")
    p.add_argument(
        "--no-clm", dest="clm", action="store_false", default=None, help="masking study: skip the CLM references"
    )
    p.add_argument("--tasks", type=_csv(str), help="fine-tuning tasks (default the 12)")
    p.add_argument(
        "--lrs",
        type=_csv(float),
        help=f"fine-tuning LRs (toy default {','.join(map(str, DEFAULT_LRS))}; paper the 6 of the grid)",
    )
    p.add_argument(
        "--seeds",
        type=_csv(int),
        help=f"fine-tuning seeds (toy default {','.join(map(str, DEFAULT_SEEDS))}; paper 0-4)",
    )
    p.add_argument(
        "--pretrain-steps",
        type=int,
        help=f"masking and data-efficiency studies: steps per run, the paper's checkpoints keeping their share of "
        f"42k (default toy {TOY_PRETRAIN_STEPS} and {TOY_DATA_EFFICIENCY_STEPS}, paper 42000)",
    )
    p.add_argument(
        "--no-random-init",
        dest="random_init",
        action="store_false",
        default=None,
        help="toy masking study: do not fine-tune the untrained model of each size (Figure 3's random-init line)",
    )
    p.add_argument("--finetune-steps", type=int, help="fine-tuning steps per run (default: the scale's config)")
    p.add_argument(
        "--runs-dir",
        help="pretraining run folders (default OUT/pretraining; share one between studies to reuse their common runs)",
    )
    p.add_argument("--workers", type=int, help="local fine-tuning processes (default 2)")
    p.add_argument("--threads", type=int, help="torch threads per process (default 1)")
    p.add_argument("--reps", type=int, help="bootstrap replicates (default 1000)")
    p.add_argument(
        "--pretrain-replicates",
        type=int,
        help="pretraining runs per configuration (default 1); runs 2..N are <name>-rep<k> with other init and "
        "data-order seeds, and the analysis writes a claims report with the pretraining SD estimated per task type",
    )
    p.add_argument(
        "--cpt-recipe",
        choices=["branches", "separate", "literal"],
        help="CPT runs: one continued run per base with decay branches (default; the paper's compute table), "
        "each length from the base, or branches with no warmup and 2,000-step decays (docs/pretraining.md)",
    )
    p.add_argument(
        "--cpt-optimizer",
        choices=["fresh", "continued"],
        help="CPT runs: a fresh AdamW (default) or the base's AdamW state from its last checkpoint",
    )
    p.add_argument(
        "--loggers",
        type=_yaml_mapping,
        help="experiment trackers of every pretraining and fine-tuning run, as YAML, e.g. "
        "'{tensorboard: {}, wandb: {project: masking}}' (offline by default; docs/watching.md)",
    )
    slurm = p.add_argument_group("Slurm (always at --scale paper)")
    slurm.add_argument("--slurm", action="store_true", help="write (and submit) Slurm jobs instead of running here")
    slurm.add_argument(
        "--cluster", help="cluster YAML (default reproduce/configs/cluster.yaml, else cluster.example.yaml)"
    )
    slurm.add_argument(
        "--dry-run", action="store_true", help="write the scripts, print the sbatch commands, submit nothing"
    )
    slurm.add_argument(
        "--mfu",
        type=float,
        help="paper scale: model FLOPs utilisation assumed by the GPU-hour estimate (default 0.4)",
    )
    slurm.add_argument(
        "--gpu-tflops",
        type=float,
        help="paper scale: peak bf16 TFLOP/s of one GPU for the estimate (default 989, an H100 SXM, dense)",
    )
    slurm.add_argument(
        "--force",
        action="store_true",
        help="submit into a folder that holds another study once none of its jobs is queued or running "
        "(its scripts, ledger and reproduce.yaml move to OUT/replaced-<time>/)",
    )
    slurm.add_argument(
        "--no-container",
        dest="container",
        action="store_false",
        help="run the same commands without apptainer (python on the nodes)",
    )
    return p


def config_from_args(args) -> ReproduceConfig:
    if args.config:
        from contracts.config import load_config

        cfg = load_config(ReproduceConfig, args.config)
        if args.scale and args.scale != cfg.scale:  # the same design at the other scale (issue 91)
            rescaled_cfg = rescaled(cfg, args.scale, args.out)
            print(
                f"reproduce: {args.config} is a {cfg.scale}-scale design; running it at {args.scale} scale in "
                f"{rescaled_cfg.out} (sizes {','.join(rescaled_cfg.sizes or ('all',))}, LRs "
                f"{','.join(f'{lr:g}' for lr in rescaled_cfg.lrs)})"
            )
            return rescaled_cfg
        return cfg
    try:
        study = study_for(table=args.table) if args.table is not None else study_for(figure=args.figure or 3)
    except StudyError as exc:
        raise ReproduceError(str(exc)) from None
    scale = args.scale or "toy"
    out = args.out or str(Path(args.out_root) / study.name)
    values = {"out": out, "study": study.name, "scale": scale, **SCALE_DEFAULTS[scale]}
    if args.reduced:
        if scale != "toy" or study.name != "masking":
            raise ReproduceError(
                "--reduced is the toy-scale CI mode of Figure 3 (masking study); for another "
                "study give a subset with --checkpoints, --tasks, --lrs and --seeds"
            )
        values.update(REDUCED)
    if scale == "toy" and study.name == "data-efficiency":  # means of 2 pretraining runs (docs/reproduce.md)
        values["pretrain_replicates"] = TOY_DATA_EFFICIENCY_REPLICATES
    for key in (
        "sizes",
        "ratios",
        "clm",
        "checkpoints",
        "tasks",
        "lrs",
        "seeds",
        "pretrain_steps",
        "random_init",
        "finetune_steps",
        "runs_dir",
        "workers",
        "threads",
        "reps",
        "pretrain_replicates",
        "cpt_recipe",
        "cpt_optimizer",
        "loggers",
    ):
        value = getattr(args, key)
        if value is not None:
            values[key] = value
    return config_from_dict(ReproduceConfig, values, "reproduce options")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from contracts.cli import run_command

    prog = {
        "status": "reproduce status",
        "resubmit": "reproduce resubmit",
        "own-checkpoint": "reproduce own-checkpoint",
        "budget": "reproduce budget",
    }.get(argv[0] if argv else "", "reproduce")
    return run_command(prog, lambda: _main(argv))


def _main(argv: list[str]) -> int:
    if argv[:1] == ["status"]:  # python -m reproduce status OUT (reproduce.status)
        from reproduce.status import main as status_main

        return status_main(argv[1:])
    if argv[:1] == ["own-checkpoint"]:  # python -m reproduce own-checkpoint MODEL --out DIR (issue 90)
        from reproduce.own_checkpoint import main as own_checkpoint_main

        return own_checkpoint_main(argv[1:])
    if argv[:1] == ["budget"]:  # python -m reproduce budget --gpu-hours H --out DIR (issue 91)
        from reproduce.budget import main as budget_main

        return budget_main(argv[1:])
    if argv[:1] == ["resubmit"]:  # python -m reproduce resubmit OUT (reproduce.slurm.resubmit)
        from reproduce.slurm.resubmit import main as resubmit_main

        return resubmit_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if args.clean:
            clean_checkpoints(Path(args.out or args.out_root))
            return 0
        cfg = config_from_args(args)
        if args.slurm or args.dry_run or (cfg.scale == "paper" and args.stage == "all"):
            reproduce_slurm(
                cfg,
                args.cluster or default_cluster_file(),
                dry_run=args.dry_run,
                container=args.container,
                mfu=args.mfu,
                gpu_tflops=args.gpu_tflops,
                force=args.force,
            )
        else:
            CURRENT_STAGE.clear()
            with interruptible():
                reproduce(cfg, stages=STAGE_NAMES if args.stage == "all" else (args.stage,))
    except (ConfigError, ReproduceError) as exc:
        print(f"reproduce: error: {exc}", file=sys.stderr)
        return 2
    except Interrupted as stop:
        where = f" in the {CURRENT_STAGE['stage']} stage" if CURRENT_STAGE.get("stage") else ""
        print(
            f"\nreproduce: interrupted by {stop.signal_name}{where} at {utc_now()} (workers ended, lock released); "
            "rerun the same command to resume",
            file=sys.stderr,
        )
        return stop.exit_code
    return 0
