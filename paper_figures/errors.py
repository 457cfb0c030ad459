"""The errors the command line reports, in a module that imports nothing heavy (issue 77)."""


class NeedsRunRecords(ValueError):
    """A figure that can only be drawn from raw run records was asked for from the tables."""


class LossLogError(ValueError):
    """A run folder without a usable loss log; the message names the file and the fix."""
