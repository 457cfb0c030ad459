"""`python -m pretraining gpu-check`: one prepared command that measures the Composer path on a GPU.

Built for a GPU machine lent for a few minutes with a bare image and no network (docs/timings.md,
"On a GPU"): every step runs in its own subprocess with its own time budget, a failure or a
timeout is recorded with its error and the check goes on, and the whole run stays within
`--budget-s`. `--cpu` runs the same steps on tiny presets, so the test suite keeps the check alive.

  plan.py     the steps, their sizes per mode and budgets, the result schema and its validation (pure)
  profiling.py  the profile step's regions: each kernel by its name, launching operator and shapes (pure)
  report.py   gpu_check.json -> gpu_check.md (pure)
  runner.py   the orchestrator: one subprocess per step, budgets, the output folder
  steps.py    the steps themselves (`python -m pretraining.gpu_check.steps STEP ...`)
  hold.py     a Composer callback that stops a training run at a step, so it can be killed there
"""
