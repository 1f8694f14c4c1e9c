"""What learners import in the notebooks: plots, widgets and small utilities that are not the exercise itself."""
from labtools.nudging import h_explorer, plot_slope_errors, slope_errors

__all__ = ["h_explorer", "plot_slope_errors", "slope_errors"]
