"""The orchestrator: a figure or table end to end, data -> pretraining -> fine-tuning -> analysis -> figures.

The one package that knows every stage (docs/architecture.md, docs/reproduce.md); no stage imports it.
`python -m reproduce --figure N | --table N --scale toy` reproduces the *study* the figure or table
belongs to (reproduce.plan.studies: masking, data-efficiency, biphasic, masking-after-clm, cpt).
Its options are planned once (reproduce.plan.build_plan -> a StudyPlan, written as OUT/plan.json);
the stages take that plan, orchestrating their own Python APIs in one process (reproduce.local):

  1. data         pretraining.data.prepare.prepare_data on the embedded corpus (seq 128), once
  2. pretraining  the pretraining.registry runs that produce the study's checkpoints (CPT bases
                  first), at toy scale renamed with the toy size and steps / 1,000
                  (`610m-clm-dec42k-mlm40-44k` -> `toy_m-clm-dec42-mlm40-44`) so every run record
                  carries its pretraining description; pretraining.train.train exports each
                  checkpoint as a Hugging Face folder (`hf/step-<step>`, intermediate ones included)
  3. fine-tuning  benchmarks.matrix.expand + benchmarks.run.run on the committed toy datasets
                  (benchmarks/configs/toy.yaml) over the chosen LRs and seeds
  4. analysis     analysis.aggregate.aggregate_runs -> cells.csv, analysis.tables.write_tables (the
                  study's tables, toy runs in the rows of the checkpoints they stand in for),
                  analysis.audit.run_audit, and the study's figures from our runs next to the
                  published ones (reproduce.figures)

Caching and resuming come from the stages: prepared data with a manifest is reused, a pretraining
run with FINISHED.json is skipped (an interrupted one autoresumes from its last checkpoint), a
fine-tuning run with record.json is skipped (an interrupted one is redone). The analysis and the
figures are redone only when the set of records changed (`analysis_inputs.json`).

`--slurm` (always at `--scale paper`) writes the same DAG as Slurm jobs instead (reproduce.slurm):
a data job, one (multi-node, Composer-launched, requeueable, autoresuming) pretraining job per
run (a CPT run after its base's job), the benchmarks.matrix job arrays of each checkpoint, and a
final analysis job, chained with `--dependency`, each running in the Apptainer image
(`--no-container`: the same commands bare); cluster specifics come from one YAML file
(`ClusterConfig`, configs/cluster.example.yaml).

Modules: studies (which checkpoints a figure or table needs), plan (the options and the DAG: runs,
configs, paths, jobs), local (the stages here), figures (the study's figures from our runs), slurm
(the DAG as Slurm jobs), cli (`python -m reproduce`).
"""
