"""`python -m tests.pretraining.count_rendezvous ARGS` = `python -m pretraining ARGS`, with each call
of `torch.distributed.init_process_group` in this rank appended as a line to
`$RENDEZVOUS_LOG.rank<RANK>` (tests/pretraining/test_multirank.py launches its ranks through it)."""

from __future__ import annotations

import os
import runpy
import sys

import torch.distributed


def _counting(init_process_group):
    def counted(*args, **kwargs):
        with open(f"{os.environ['RENDEZVOUS_LOG']}.rank{os.environ['RANK']}", "a") as log:
            log.write("init_process_group\n")
        return init_process_group(*args, **kwargs)

    return counted


if __name__ == "__main__":
    # Composer and mosaicml-streaming both call it as an attribute of torch.distributed.
    torch.distributed.init_process_group = _counting(torch.distributed.init_process_group)
    sys.argv[0] = "pretraining"
    runpy.run_module("pretraining", run_name="__main__", alter_sys=True)
