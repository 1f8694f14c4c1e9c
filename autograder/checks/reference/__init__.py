"""Reference code that is installed in the sandboxed worker, next to the learner's objects (``remote.beside``).

Each module is self-contained (numpy and the standard library only) because it runs in the learner's process, and
nothing it reports is trusted: the checks verify every result on the trusted side.
"""
