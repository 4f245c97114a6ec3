"""The untrusted side: code that runs in the sandboxed child process, next to the student's.  Imports nothing
of the kit but autograder.protocol."""
