"""Grading runs: one notebook (``notebook``: ``python -m autograder grade``), and a whole class on Dask, split by
the process each part runs in -- ``class_run`` (the command's process: scheduling, and the one process that writes
the gradebook), ``on_dask_worker`` (a task), ``grading_process`` (one submission's nbgrader run, forked there) and
``submission`` (the plain data that travels between them). ``cpu`` measures what a submission cost.
"""
