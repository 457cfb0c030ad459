"""The choices the analysis command line offers, free of pandas and scipy: `python -m analysis
--help` and its parser load none of the statistics (issue 77). The modules that act on them import
them from here."""

FORMATS = ("md", "csv", "tex")  # analysis.tables: the files of Tables 2-17
QUESTIONS = ("auto", "checkpoint", "recipe")  # analysis.recipe: what a set of runs reproduces
FAIL_ON = ("none", "any-differs", "any-differs-incl-assumed", "not-reproduced")  # analysis.audit: when an audit exits 1
