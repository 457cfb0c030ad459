"""An interrupted CLI ends with one line and 128 + the signal (contracts.cli.run_command).

Before Composer is imported a Ctrl-C is Python's KeyboardInterrupt (it printed a traceback);
after it, Composer's own handlers turn SIGINT and SIGTERM into sys.exit(128 + signal) (they ended
`benchmarks matrix --local` without a word). Each case runs in its own process with a real signal
sent by the process to itself: delivered before the next bytecode, no waiting on time."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import textwrap

import pytest

from contracts.cli import INTERRUPTED_NOTE, run_command, signal_exit

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from contracts.cli import run_command

    def command():
        if {composer}:
            import composer.core.engine  # installs Composer's SIGINT/SIGTERM handlers
        os.kill(os.getpid(), signal.{signal})
        while True:  # the handler raises at the next bytecode
            pass

    sys.exit(run_command("stage", command))
    """
)


@pytest.mark.parametrize(
    ("signame", "composer", "code"),
    [("SIGINT", False, 130), ("SIGINT", True, 130), ("SIGTERM", True, 143)],
)
def test_a_signal_ends_the_cli_with_one_line_and_its_exit_status(signame, composer, code):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(composer=composer, signal=signame)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == code, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1] == f"stage: interrupted by {signame} (exit {code}): {INTERRUPTED_NOTE}"
    assert "Traceback" not in done.stderr


def test_another_sys_exit_is_not_taken_for_an_interrupt():
    def command():
        sys.exit(143)  # a command's own exit status, not Composer's handler

    with pytest.raises(SystemExit) as raised:
        run_command("stage", command)
    assert raised.value.code == 143
    assert signal_exit(raised.value) is None


def test_composers_handler_is_recognised_in_process(capsys):
    held = {each: signal.getsignal(each) for each in (signal.SIGINT, signal.SIGTERM)}
    from composer.core.engine import sigterm_handler

    for each, handler in held.items():  # importing Composer replaced pytest's own
        if handler is not None:
            signal.signal(each, handler)

    assert run_command(None, lambda: sigterm_handler(signal.SIGTERM, None)) == 143
    assert capsys.readouterr().err.strip() == f"interrupted by SIGTERM (exit 143): {INTERRUPTED_NOTE}"


def test_a_reader_that_goes_away_ends_the_cli_quietly_as_sigpipe_does():
    """Issue 80: `reproduce status OUT | head` ended with 'error: [Errno 32] Broken pipe' and exit 2.
    The writer here outlives its reader by design: head -c 1 exits after one byte, and the command
    writes 1 MB (more than a pipe holds), so its next write after head exits fails."""
    script = textwrap.dedent(
        """
        import sys
        from contracts.cli import run_command

        def command():
            for _ in range(1024):
                print("x" * 1023)
            return 0

        sys.exit(run_command("reproduce status", command))
        """
    )
    shell = f"{sys.executable} -c {shlex.quote(script)} | head -c 1 >/dev/null; echo ${{PIPESTATUS[0]}}"
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120)
    assert done.stderr == "" and done.stdout.strip() == str(128 + signal.SIGPIPE), (done.stdout, done.stderr)
