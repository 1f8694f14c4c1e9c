# JupyterHub's configuration for `make hub`: everything is in autograder.tools.hub, with the settings that
# `python -m autograder hub` passes in BACKPROP_HUB (the state folder, the exchange, the accounts, the address).
import os

from autograder.tools.hub import SETTINGS_ENV, Hub, configure

configure(get_config(), Hub.from_env(os.environ[SETTINGS_ENV]))  # noqa: F821 (provided by JupyterHub)
