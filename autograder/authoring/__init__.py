"""Tools for whoever writes an assignment: sync, release, samples, check-suite, demo, benchmark."""
