"""`python -m reproduce budget`: the command (search's designs, or `--audit MODEL`'s plan)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reproduce.budget.search import DEFAULT_SIMS, BudgetError, build_parser, screen, search, write_outputs


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.sims < 100:
            raise BudgetError(f"--sims {args.sims}: give at least 100")
        if args.audit is not None:
            return _main_audit(args)
        if args.gpu_hours is None:
            raise BudgetError("give --gpu-hours H (the allocation) or --audit MODEL")
        result = search(
            args.gpu_hours, args.mfu, args.gpu_tflops, args.pretraining_sd, args.sims, args.sizes, args.single_lr
        )
    except BudgetError as exc:
        print(f"reproduce budget: error: {exc}", file=sys.stderr)
        return 2
    written = write_outputs(result, Path(args.out))
    print("\n".join(screen(result)))
    print(f"wrote {', '.join(map(str, written))}")
    return 0


AUDIT_BUDGET_FILE = "audit_budget.json"


def _main_audit(args) -> int:
    from contracts.provenance import atomic_write_text
    from reproduce.budget.audit import AUDIT_SIMS, audit_lines, audit_plan

    if args.gpu_hours is not None:
        raise BudgetError("--audit sizes one model's reproduction; drop --gpu-hours")
    sims = max(args.sims, AUDIT_SIMS) if args.sims == DEFAULT_SIMS else args.sims
    plan = audit_plan(args.audit, args.pretraining_sd, sims, mfu=args.mfu, gpu_tflops=args.gpu_tflops)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / AUDIT_BUDGET_FILE, json.dumps(plan, indent=2) + "\n")
    print("\n".join(audit_lines(plan)))
    print(f"wrote {out / AUDIT_BUDGET_FILE}")
    return 0
