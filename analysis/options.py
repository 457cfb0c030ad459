"""The choices the analysis command line offers, free of pandas and scipy: `python -m analysis
--help` and its parser load none of the statistics (issue 77). The modules that act on them import
them from here."""

FORMATS = ("md", "csv", "tex")  # analysis.tables: the files of Tables 2-17
QUESTIONS = ("auto", "checkpoint", "recipe")  # analysis.recipe: what a set of runs reproduces
FAIL_ON = ("none", "any-differs", "any-differs-incl-assumed", "not-reproduced")  # analysis.audit: when an audit exits 1
PAPER_TABLES = range(2, 18)  # Tables 2-17: the tables `compare` can put your models beside


def table_numbers(text: str) -> tuple[int, ...]:
    """`--tables 2,3,4,5` -> (2, 3, 4, 5), sorted and distinct; ValueError (one line, naming the flag)
    for anything else. Shared by `analysis compare` and `reproduce own-checkpoint`."""
    try:
        numbers = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise ValueError(f"--tables: {text!r} is not a comma-separated list of table numbers (e.g. 2,3,4,5)") from None
    if not numbers or any(n not in PAPER_TABLES for n in numbers):
        raise ValueError(f"--tables: give numbers between 2 and 17, got {text!r}")
    return numbers
