"""What learners import in the notebooks: plots, widgets and small utilities that are not the exercise itself."""
from labtools.backward import gradcheck, show_broadcast
from labtools.checking import run_check
from labtools.checkpointing import checkpoint, peak_memory_and_time, plot_memory_and_time
from labtools.datasets import load_fashion_mnist, load_mnist
from labtools.graph import draw_tensors
from labtools.nudging import h_explorer, plot_slope_errors, slope_errors
from labtools.source_view import optional_import, side_by_side
from labtools.training import plot_confusion, plot_history, show_images

__all__ = ["checkpoint", "draw_tensors", "gradcheck", "h_explorer", "load_fashion_mnist", "load_mnist",
           "optional_import", "peak_memory_and_time", "plot_confusion", "plot_history", "plot_memory_and_time",
           "plot_slope_errors", "run_check", "show_broadcast", "show_images", "side_by_side", "slope_errors"]
