"""The operating-system process a run lives in.

threads.py   the thread policy of a run's process (`run.threads`);
lifeline.py  a child process's tie to its launcher: no orphan outlives it;
heap.py      the garbage collector leaves what the process held before the loop alone;
signals.py   Ctrl-C and SIGTERM held back while a block writes something that must land whole.
"""
