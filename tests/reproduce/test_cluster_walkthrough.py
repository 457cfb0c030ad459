"""docs/cluster.md followed start to finish, as a newcomer would, against a Hub emulated on
127.0.0.1 (tests.hub_server): every command of its code blocks, in order, with `/shared` a temporary
folder and `$HOME` another (issue 35: "the cluster page is followed start to finish against a local
Hub emulation").

The commands are read from the page, not copied here: a command this test does not know fails it,
so the page and the test cannot drift apart. Each is run as written (`python -m ...` through this
checkout's Python, shell lines through bash), or replaced by a stand-in where this machine cannot
do what it asks, each stand-in saying why (`STAND_INS`): no Apptainer or Slurm here, no interactive
login, and no clone or setup (this checkout is the clone). The Hub serves the toy task mirror, two
of the paper's released names (a tiny checkpoint with its own model code), a stand-in for the
Llama-3 tokenizer and a FineWeb-Edu-style corpus with a `sample-350BT` config."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from container.build import write_build_record
from container.definition import LOCK
from pretraining.assets import ASSETS_DIR, EMBEDDED_CORPUS
from tests.benchmarks.tiny import save_remote_code_model
from tests.benchmarks.toy_hub import model_repo, serve, toy_hub
from tests.hub_server import HubServer
from tests.pretraining.test_fetch_corpus import fineweb_readme
from tests.reproduce.slurm_study import stand_in_image

pytestmark = pytest.mark.e2e  # the cluster page followed start to finish (tests/README.md)

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "cluster.md"
TOKEN = "hf_walkthrough_token"
FINEWEB_README = fineweb_readme("sample-350BT", "sample/350BT")


def page_commands(page: Path = PAGE) -> list[str]:
    """The shell commands of the page's ```bash blocks before its cost section, in order: comment
    lines dropped, continued lines joined, a here-document kept with its command."""
    text = page.read_text().split("\n## What the DAG costs")[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        lines = block.splitlines()
        while lines:
            line = lines.pop(0)
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            while line.endswith("\\"):
                line = line[:-1] + " " + lines.pop(0).strip()
            heredoc = re.search(r"<<'(\w+)'", line)
            if heredoc:
                body = []
                while lines[0] != heredoc.group(1):
                    body.append(lines.pop(0))
                line = "\n".join([line, *body, lines.pop(0)])
            commands.append(line if heredoc else re.sub(r"\s{2,}#.*$", "", line).strip())  # a trailing comment
    return commands


# Commands of the page this machine cannot run as written, and why; the test does what they would
# have done, or skips what this checkout already is.
STAND_INS = {
    "git clone": "this checkout is the clone",
    "make setup": "the checkout's .venv is set up",
    "make container": "no Apptainer here: an image file stands in",
    "hf auth login": "interactive: the token is written where it writes it, $HF_TOKEN_PATH",
    "python -m pretraining configs --list |": "all 50 names: the emulated Hub serves the two the page names",
    "PYTHON=": "no Slurm here: a stand-in sbatch records the submission, then one array task runs",
    "cp reproduce/configs/cluster.example.yaml": "the checkout is not written to: the copy goes to a temporary file",
    "make reproduce": "the same command as `python -m reproduce`, with the copied cluster.yaml",
}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    models = tmp_path_factory.mktemp("models")
    corpus = pq.read_table(EMBEDDED_CORPUS)
    fineweb = {"README.md": FINEWEB_README}
    for i in range(2):
        path = models / f"{i}.parquet"
        pq.write_table(corpus.slice(60 * i, 60), path)
        fineweb[f"sample/350BT/00{i}_00000.parquet"] = path.read_bytes()
    with HubServer() as server:
        serve(server, toy_hub())
        for seed, name in enumerate(("610m-mlm40-42k", "610m-clm-42k")):
            server.add("model", f"MLMvsCLM/{name}", model_repo(save_remote_code_model(models / name, seed=seed)))
        server.add(
            "model",
            "meta-llama/Meta-Llama-3-8B",
            {p.name: p.read_bytes() for p in (ASSETS_DIR / "tokenizer").iterdir()},
        )
        server.add("dataset", "HuggingFaceFW/fineweb-edu", fineweb)
        yield server


def _fake_tools(bin_dir: Path, log: Path) -> None:
    """`sbatch` (prints a job id) and `apptainer` (records what it was asked to run), on PATH."""
    bin_dir.mkdir(parents=True)
    for name, body in {
        "sbatch": f'echo "sbatch $*" >> {log}\necho "4242;cluster"\n',
        "apptainer": f'echo "apptainer $*" >> {log}\n',
    }.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)


@pytest.mark.e2e  # about 3 min on the shared 2-core machine: 13 CLI subprocesses
def test_the_cluster_page_followed_start_to_finish(hub, tmp_path):
    shared, home, work = tmp_path / "shared", tmp_path / "home", tmp_path / "checkout-cwd"
    for folder in (shared, home, work):
        folder.mkdir()
    log = tmp_path / "tools.log"
    _fake_tools(tmp_path / "bin", log)
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HOME": str(home),
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    env.pop("HF_TOKEN", None)
    env.pop("HF_HOME", None)
    env.pop("HF_TOKEN_PATH", None)
    cluster_yaml = tmp_path / "cluster.yaml"
    seen: list[str] = []

    def local(command: str) -> str:
        return command.replace("/shared", str(shared)).replace("$HOME", str(home))

    def run(argv: list[str] | str, codes=(0,), **kw) -> subprocess.CompletedProcess:
        shell = isinstance(argv, str)
        result = subprocess.run(
            argv, shell=shell, executable="/bin/bash" if shell else None, env=env, cwd=work,
            capture_output=True, text=True, timeout=600, **kw,
        )  # fmt: skip
        assert result.returncode in codes, f"{argv}\n{result.stdout}\n{result.stderr}"
        return result

    for command in page_commands():
        seen.append(command)
        stand_in = next((key for key in STAND_INS if command.startswith(key)), None)
        concrete = local(command)
        if stand_in in ("git clone", "make setup", "python -m pretraining configs --list |"):
            continue
        if stand_in == "make container":
            image = Path(concrete.split("IMAGE=")[1].split()[0])
            stand_in_image(image)  # a SIF header, the size of a real image (sparse)
            write_build_record(image, "stand-in", LOCK)  # as make container does after its build
        elif stand_in == "hf auth login":
            token_path = Path(env["HF_TOKEN_PATH"])
            token_path.parent.mkdir(parents=True, exist_ok=True)
            token_path.write_text(TOKEN)
        elif command.startswith("export "):
            for assignment in shlex.split(concrete)[1:]:
                key, _, value = assignment.partition("=")
                env[key] = value
        elif command.startswith("python -m "):
            argv = shlex.split(concrete)
            checks_data = argv[2:4] == ["pretraining", "verify-data"]
            result = run([sys.executable, *argv[1:]], codes=(0, 1) if checks_data else (0,))
            if argv[2:4] == ["benchmarks", "matrix"]:
                assert Path(argv[argv.index("--slurm-script") + 1]).is_file()
            if checks_data:  # the toy corpus is far smaller than a CPT run reads: it must say so
                assert "verify-data: FAILED: 610m-clm-dec42k-mlm40-64k.yaml: data: " in result.stderr
                assert "this run reads samples 48,384,000 to 73,727,999" in result.stderr
        elif stand_in == "PYTHON=":
            run(concrete)  # the submission, through the stand-in sbatch
            submitted = [line for line in log.read_text().splitlines() if line.startswith("sbatch")]
            assert len(submitted) == 3 and "--job-name=mlmclm-finetune" in submitted[0]
            script = concrete.split()[-1]
            run(f"{concrete.split()[0]} SLURM_ARRAY_TASK_ID=0 bash {script} finetune")  # one array task
            ran = [line for line in log.read_text().splitlines() if line.startswith("apptainer")][-1]
            assert ran.startswith(f"apptainer exec --nv --bind {shared} {shared}/containers/mlm_vs_clm.sif python")
            assert "-m benchmarks job --jobs" in ran and "--group finetune --index 0" in ran
        elif stand_in == "cp reproduce/configs/cluster.example.yaml":
            example = (ROOT / "reproduce" / "configs" / "cluster.example.yaml").read_text()
            cluster_yaml.write_text(local(example))
        elif stand_in == "make reproduce":
            if "DRY_RUN=1" not in command:
                continue  # a submission: no Slurm here (the dry run checks what it would check)
            figure = re.search(r"FIGURE=(\d+)", command).group(1)
            argv = ["--figure", figure, "--scale", "paper", "--out-root", str(tmp_path / "outputs")]
            result = run([sys.executable, "-m", "reproduce", *argv, "--cluster", str(cluster_yaml), "--dry-run"])
            # the image, the shards, the tokenizer and the task data are there; the toy corpus is far
            # smaller than a 42k-step run reads, which the preflight now says (issue 53)
            assert "preflight: 1 missing for the offline jobs" in result.stdout
            assert "prepared pretraining data too small (and 14 other runs): run " in result.stdout
            assert "the paper (Section 2) reports 110,000 AMD MI250X GPU-hours" in result.stdout
        else:
            run(concrete)  # plain shell lines (mkdir, the wrapper's here-document, chmod)

    # every step of the page ran, in the page's order
    firsts = [c.split()[0:4] for c in seen]
    assert ["python", "-m", "benchmarks", "fetch-data"] in firsts and ["python", "-m", "benchmarks", "matrix"] in firsts
    assert sum(c.startswith("make reproduce") for c in seen) == 2
    # the tasks, checkpoints, tokenizer and shards are where the page says, checked by the tools
    assert (shared / "data" / "tasks" / "manifest.json").is_file()
    assert (shared / "models" / "610m-clm-42k" / "fetch_manifest.json").is_file()
    assert (shared / "data" / "fineweb-edu-350BT-llama3-2048" / "manifest.json").is_file()
    # the login kept the personal token at home; the gated tokenizer was fetched with it
    assert not list(shared.rglob("token")) and (home / ".cache" / "huggingface" / "token").read_text() == TOKEN
    tokenizer_gets = [r for r in hub.requests if "meta-llama/Meta-Llama-3-8B" in r["path"]]
    assert tokenizer_gets and all(r["auth"] == f"Bearer {TOKEN}" for r in tokenizer_gets)


def test_every_command_of_the_page_is_known_to_the_walkthrough():
    """A new command on the page must be taught to the walkthrough (or given a stand-in)."""
    known = ("python -m ", "export ", "mkdir -p ", "chmod ", *STAND_INS)
    unknown = [c for c in page_commands() if not c.startswith(known)]
    assert unknown == []
    assert len(page_commands()) >= 20
