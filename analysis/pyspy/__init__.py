"""py-spy raw profiles: reading them, attributing samples to a library, call trees (``samples``)."""

from analysis.pyspy.samples import call_tree, load_profiles, parse_pyspy, pyspy_report, read_pyspy

__all__ = ["call_tree", "load_profiles", "parse_pyspy", "pyspy_report", "read_pyspy"]
