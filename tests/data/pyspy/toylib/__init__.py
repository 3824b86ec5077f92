"""A stand-in "library" for the py-spy recordings: the report attributes samples to its frames."""
