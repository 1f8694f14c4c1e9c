"""What learners import in the notebooks: plots, widgets and small utilities that are not the exercise itself."""
from labtools.backward import gradcheck, show_broadcast
from labtools.nudging import h_explorer, plot_slope_errors, slope_errors

__all__ = ["gradcheck", "h_explorer", "plot_slope_errors", "show_broadcast", "slope_errors"]
