"""What learners import in the notebooks: plots, widgets and small utilities that are not the exercise itself."""
from labtools.backward import gradcheck, show_broadcast
from labtools.checking import run_check
from labtools.datasets import load_fashion_mnist, load_mnist
from labtools.graph import draw_tensors
from labtools.nudging import h_explorer, plot_slope_errors, slope_errors
from labtools.training import plot_confusion, plot_history, show_images

__all__ = ["draw_tensors", "gradcheck", "h_explorer", "load_fashion_mnist", "load_mnist", "plot_confusion", "plot_history",
           "plot_slope_errors", "run_check", "show_broadcast", "show_images", "slope_errors"]
