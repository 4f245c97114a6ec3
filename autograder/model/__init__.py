"""What every side of the grader agrees on, and nothing else: the Submission a hidden suite talks to
(`submission`), the limits a grading runs under (`limits`), and what a notebook's cells are (`cells`).  It
imports only the wire format (autograder.protocol), so the host, the judging and the reports can all build
on it without importing one another."""
