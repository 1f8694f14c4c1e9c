"""What learners import in the notebooks: plots, widgets and small utilities that are not the exercise itself."""
from labtools.backward import gradcheck, show_broadcast
from labtools.graph import draw_tensors
from labtools.nudging import h_explorer, plot_slope_errors, slope_errors

__all__ = ["draw_tensors", "gradcheck", "h_explorer", "plot_slope_errors", "show_broadcast", "slope_errors"]
