"""gpu_check.json -> gpu_check.md: the headline numbers first, then one table per step (pure)."""

from __future__ import annotations

from pretraining.gpu_check import plan

# Issue 82: 610M through Composer, NEEDED FLOPs (the LM head at the predicted positions only:
# pretraining.flops) of the spec peak. Issue 68 had set 45% / 40% in model FLOPs (6N + attention),
# which credit MLM with the head's work at the 60% of positions it never computes.
MFU_GOALS = {"mlm": 0.45, "clm": 0.45}
NOT_RECORDED = plan.error("not recorded (a check written before issue 82)")


def cell(value, digits: int = 1, percent: bool = False) -> str:
    if plan.is_error(value):
        return f"error: {value['error'][:90]}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if percent:
            return f"{100 * value:.{digits}f} %"
        return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"
    return str(value)


def best_composer_row(rows: list[dict], preset: str, objective: str | None = None, kernels: str | None = None):
    """The Composer row of `preset` (and objective, kernel bundle) with the highest throughput
    (None: no measured one)."""
    measured = [
        r
        for r in rows
        if r["preset"] == preset
        and (objective is None or r["objective"] == objective)
        and (kernels is None or r.get("kernels", "reference") == kernels)
        and r["path"].startswith("composer")
        and plan.is_number(r.get("tokens_per_s"))
    ]
    return max(measured, key=lambda r: r["tokens_per_s"], default=None)


def _best_line(rows: list[dict], preset: str, objective: str, kernels: str | None, label: str) -> str:
    best = best_composer_row(rows, preset, objective, kernels)
    if best is None:
        return f"- {preset} {objective.upper()} through Composer, {label}: no measured row"
    needed, goal = best.get("mfu_needed_spec", NOT_RECORDED), MFU_GOALS.get(objective)
    verdict = ""
    if preset == "610m" and goal is not None:
        met = "met" if plan.is_number(needed) and needed >= goal else "not met"
        verdict = f" (goal >= {goal:.0%} of the needed FLOPs: {met})"
    return (
        f"- {preset} {objective.upper()} through Composer, {label} `{best['case']}`: {cell(best['tokens_per_s'], 0)} "
        f"tokens/s; MFU in needed FLOPs {cell(needed, percent=True)} of the spec peak, "
        f"{cell(best.get('mfu_needed_measured', NOT_RECORDED), percent=True)} of the measured matmul peak; in model "
        f"FLOPs (6N + attention) {cell(best['mfu_spec'], percent=True)} and {cell(best['mfu_measured'], percent=True)}"
        f"{verdict}"
    )


PEER_GOAL = 1.3  # issue 82: ours through Composer at least 1.3x the Hugging Face Trainer's tokens/s
PEER_NAMES = {"hf-trainer": "Hugging Face Trainer"}


def peer_rows(rows: list[dict]) -> list[tuple[dict, dict | None, dict | None]]:
    """(peer row, our Composer row of the same case, our best Composer row of the preset and
    objective) for every measured peer row."""
    out = []
    for peer in rows:
        if str(peer.get("path", "")).split("+")[0] not in PEER_NAMES or not plan.is_number(peer.get("tokens_per_s")):
            continue
        same = [
            r
            for r in rows
            if r["case"] == peer["case"] and r["path"].startswith("composer") and plan.is_number(r.get("tokens_per_s"))
        ]
        best = best_composer_row(rows, peer["preset"], peer["objective"])
        out.append((peer, same[0] if same else None, best))
    return out


def _ratio(ours: dict | None, peer: dict) -> str:
    if ours is None:
        return "—"
    return f"{ours['tokens_per_s'] / peer['tokens_per_s']:.2f}x"


def _peer_line(peer: dict, same: dict | None, best: dict | None) -> str:
    name = PEER_NAMES[peer["path"].split("+")[0]]
    verdict = ""
    if best is not None and peer["preset"] == "610m":
        met = "met" if best["tokens_per_s"] / peer["tokens_per_s"] >= PEER_GOAL else "not met"
        verdict = f" (goal >= {PEER_GOAL}x: {met})"
    return (
        f"- {peer['preset']} {peer['objective'].upper()}, {name} `{peer['case']}`: {cell(peer['tokens_per_s'], 0)} "
        f"tokens/s; ours through Composer on the same case {_ratio(same, peer)} of it, our best Composer row "
        f"{_ratio(best, peer)}{verdict}"
    )


def headline(result: dict) -> list[str]:
    steps = result["steps"]
    lines = []
    rows = steps["bench"]["rows"]
    for preset in dict.fromkeys(r["preset"] for r in rows):
        for objective in dict.fromkeys(r["objective"] for r in rows if r["preset"] == preset):
            lines.append(_best_line(rows, preset, objective, "reference", "reference kernels, best"))
            lines.append(_best_line(rows, preset, objective, None, "best of all"))
    lines += [_peer_line(*found) for found in peer_rows(rows)]
    p = steps["parity"]["metrics"]
    lines.append(
        f"- bf16 vs fp32 ({cell(p['steps'], 0)} MLM steps): largest relative loss difference "
        f"{cell(p['max_rel_diff'], 3, percent=True)} (step {cell(p['step_of_max'], 0)}), mean "
        f"{cell(p['mean_rel_diff'], 3, percent=True)}; fast kernels vs reference (both bf16): largest "
        f"{cell(p['fast_max_rel_diff'], 3, percent=True)}, within that bound: {cell(p['fast_within_bound'])}"
    )
    r = steps["resume"]["metrics"]
    lines.append(
        f"- kill and resume: exact up to the device's floor: {cell(r['exact_up_to_floor'])} (bitwise equal: "
        f"{cell(r['losses_equal'])}; largest difference after the checkpoint {cell(r['max_abs_diff_after_resume'], 6)} "
        f"against {cell(r['floor_max_abs_diff_after'], 6)} between two uninterrupted runs over the same steps, "
        f"margin {cell(r['floor_factor'])}x; the floor's runs bitwise equal: {cell(r['floor_losses_equal'])})"
    )
    minutes = ", ".join(
        f"{row['task_type']} {cell(row['minutes_per_1000_steps'], 2)}" for row in steps["finetune"]["rows"]
    )
    lines.append(f"- fine-tuning, minutes per 1,000-step run: {minutes}")
    return lines


def profile_table(rows: list[dict]) -> list[str]:
    """One row per region, one column per profiled case (ms per step, share of the step)."""
    cases = list(dict.fromkeys(r["case"] for r in rows))
    by_key = {(r["case"], r["region"]): r for r in rows}
    body = []
    for region in plan.PROFILE_REGIONS:
        line = [region]
        for case in cases:
            row = by_key.get((case, region), {})
            ms, share = row.get("ms_per_step"), row.get("share_of_step")
            line.append(f"{cell(ms, 2)} ({cell(share, 1, percent=True)})" if plan.is_number(ms) else cell(ms))
        body.append(line)
    steps_ms = [cell(next((r["step_ms"] for r in rows if r["case"] == c), None), 2) for c in cases]
    body.append(["step (wall)", *steps_ms])
    return table(["region", *cases], body)


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def render(result: dict) -> str:
    steps = result["steps"]
    env = steps["environment"]
    info, metrics = env["info"], env["metrics"]
    out = [
        f"# GPU check ({result['mode']} mode): {cell(info['device_name'])}",
        "",
        f"Written by `{result['command']}` on {result['finished']} (git {result['git_sha']}); budget "
        f"{result['budget_s']:.0f} s, {result['elapsed_s']:.0f} s used. Every number below was measured by that "
        "command; a cell that says `error` names why it is missing.",
        "",
        "## Headline",
        "",
        *headline(result),
        "",
        "## Steps",
        "",
        *table(
            ["step", "status", "seconds", "error"],
            [[s, e["status"], cell(e.get("seconds"), 0), (e.get("error") or "")[:200]] for s, e in steps.items()],
        ),
        "",
        "## Environment",
        "",
        *table(["field", "value"], [[k, cell(v)] for k, v in info.items()]),
        "",
        *table(
            ["measure", "value"],
            [
                [
                    f"{result['matmul_dtype']} matmul {metrics['matmul_size']}^3, TFLOP/s",
                    cell(metrics["matmul_tflops"], 3),
                ],
                ["spec dense bf16 peak, TFLOP/s", cell(metrics["spec_peak_tflops"], 0)],
                ["device memory, GiB", cell(metrics["device_memory_gib"])],
            ],
        ),
        "",
        "## Where a step goes (`profile`: torch.profiler over the plain loop's steps after warm-up)",
        "",
        "Milliseconds per step by region (pretraining/gpu_check/profiling.py: each kernel by its name and the "
        "operator that launched it); `idle` is the step's wall time no kernel covers.",
        "",
        *profile_table(steps["profile"]["rows"]),
        "",
        "## Pretraining step throughput (`pretraining bench`)",
        "",
        "Synthetic packed batches, attention per window (two random windows a block), MFU = FLOPs / time / "
        "peak in two counts (pretraining/flops.py): **model** FLOPs, 6N + attention over the attended pairs (N "
        "without the input embedding; the LM head at every position: what other trainers usually report), and "
        "**needed** FLOPs, the LM head only at the positions that are predicted (the masked ones under MLM; the "
        "goals use this count); `measured` divides by the matmul TFLOP/s above.",
        "",
        *table(
            [
                "case",
                "kernels",
                "path",
                "tokens/s",
                "MFU 6N (spec)",
                "MFU model (spec)",
                "MFU needed (spec)",
                "MFU model (measured)",
                "MFU needed (measured)",
                "peak GiB",
                "seconds",
            ],
            [
                [
                    r["case"],
                    r.get("resolved_kernels") or r.get("kernels", "reference"),
                    r["path"],
                    cell(r["tokens_per_s"], 0),
                    cell(r["mfu_6n_spec"], percent=True),
                    cell(r["mfu_spec"], percent=True),
                    cell(r.get("mfu_needed_spec", NOT_RECORDED), percent=True),
                    cell(r["mfu_measured"], percent=True),
                    cell(r.get("mfu_needed_measured", NOT_RECORDED), percent=True),
                    cell(r["peak_gpu_memory_gib"]),
                    cell(r["seconds"], 2),
                ]
                for r in steps["bench"]["rows"]
            ],
        ),
        "",
        "## Peers: the same step through another trainer (issue 82)",
        "",
        "The Hugging Face Trainer on the same model class, batches, batch size, sequence and precision "
        "(pretraining/peers.py says what is the same and what is the Trainer's own); the ratio is our "
        "tokens/s over the peer's, on the same case and for our best Composer row of that preset and objective.",
        "",
        *table(
            ["peer case", "peer tokens/s", "MFU model (spec)", "MFU needed (spec)", "ours, same case", "ours, best"],
            [
                [
                    f"{p['case']} ({p['path']})",
                    cell(p["tokens_per_s"], 0),
                    cell(p["mfu_spec"], percent=True),
                    cell(p.get("mfu_needed_spec", NOT_RECORDED), percent=True),
                    _ratio(same, p),
                    _ratio(best, p),
                ]
                for p, same, best in peer_rows(steps["bench"]["rows"])
            ],
        ),
        "",
        "## bf16 / fp32 loss parity",
        "",
        *table(["measure", "value"], [[k, cell(v, 4)] for k, v in steps["parity"]["metrics"].items()]),
        "",
        "## Kill and resume (`python -m pretraining train`, paper-shaped 210m config)",
        "",
        *table(["measure", "value"], [[k, cell(v, 6)] for k, v in steps["resume"]["metrics"].items()]),
        "",
        "## Fine-tuning (`python -m benchmarks run`, random weights, toy-world data, paper protocol)",
        "",
        *table(
            ["task type", "task", "steps", "tokens/step", "s/step", "min per 1,000 steps", "peak GiB", "process s"],
            [
                [
                    r["task_type"],
                    r["task"],
                    cell(r["steps"], 0),
                    cell(r["tokens_per_step"], 0),
                    cell(r["seconds_per_step"], 3),
                    cell(r["minutes_per_1000_steps"], 2),
                    cell(r["peak_gpu_memory_gib"]),
                    cell(r["wall_s"], 1),
                ]
                for r in steps["finetune"]["rows"]
            ],
        ),
        "",
    ]
    return "\n".join(out)
