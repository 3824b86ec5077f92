"""Kineto traces in: sources (local, gs://), parsing, the cache, the loader, the columnar model,
the event masks that say which rows are what, and the analysed window of profiler steps."""
