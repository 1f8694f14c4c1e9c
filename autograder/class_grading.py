"""The class run's entry point under the name earlier releases gave it, for instructors' scripts that import
``grade_class`` from here (autograder.grade.class_run is where it lives)."""
from autograder.grade.class_run import ClassGradingError, grade_class

__all__ = ["ClassGradingError", "grade_class"]
