"""Mounted as the __init__.py of every autodiff package inside the grading sandbox (see autograder.trust.sandbox)."""
raise ImportError("this library cannot be imported while your code is graded: the exercise is to compute gradients "
                  "yourself, with numpy")
