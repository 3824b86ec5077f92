"""Test data the project generates itself: synthetic traces with exact ground truth."""
