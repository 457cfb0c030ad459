"""Contracts shared by every stage: the paper's names, the run-record schema, typed configs.

Data flows one way (pretraining -> benchmarks -> analysis -> paper_figures); this package is the
only one every stage may import, and it imports no stage.
"""
