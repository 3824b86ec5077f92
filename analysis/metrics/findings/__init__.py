"""Findings: what the other analyses say is wrong, ranked, with the evidence and the usual fix.

- ``findings``: the rules and the derived analysis (the entry); it reads other analyses' results
  by registry name (``REQUIRES``), and of their modules only constants and definitions it shares
  (the launch classification, the TensorBoard plugin's tensor-core operators).

Entries: :mod:`analysis.metrics.findings.catalogue`.
"""
