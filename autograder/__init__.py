"""Sandboxed grading engine for the transformer-building-blocks assignments."""
