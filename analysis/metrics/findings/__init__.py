"""Findings: what the other analyses say is wrong, ranked, with the evidence and the usual fix.

- ``findings``: the rules and the derived analysis (the entry); it reads other analyses' results
  by registry name (``REQUIRES``), never their modules.

Entries: :mod:`analysis.metrics.findings.catalogue`.
"""
