"""Harmony for Python: local differential privacy on numpy arrays and pandas frames.

Mechanisms by name (``FrequencyOracle``, ``NumericMechanism``) randomize numpy arrays in Rust
and estimate with standard errors and 95% CIs; ``Schema`` and ``simulate`` run the CLI's
multi-attribute collection on a DataFrame; ``simulate_task`` runs any task of the protocol (a
``CreateCollection`` request) through the registry a server runs, its ``Estimates`` as
tables; ``train`` fits a linear model from a frame's rows as devices of a ``train``
collection (a ``Model`` with ``predict``); ``Analyst`` creates collections on a server and reads their estimates; ``Device`` submits a
frame's rows as devices randomizing under the device's own policy; ``Aggregator`` adds a
collection's reports, saves and merges its state (``harmony_ldp.spark`` runs it on Spark). Every error is
a ``HarmonyError`` (a ``ValueError``).

>>> import numpy as np
>>> import harmony_ldp as hl
>>> oracle = hl.FrequencyOracle("grr", epsilon=2.0, d=3)
>>> est = oracle.estimate(oracle.randomize(np.array([0, 0, 1, 2] * 5000), seed=7), as_frame=False)
>>> bool(abs(est["estimate"][0] - 0.5) < 4.42 * est["std_error"][0])
True
"""

from ._aggregate import Aggregator, device_reports, read_spec, resolve_config
from ._analyst import Analyst
from ._device import Device
from ._errors import HarmonyError
from ._plan import plan
from ._mechanisms import FREQUENCY_NAMES, NUMERIC_NAMES, FrequencyOracle, NumericMechanism, unpack_bits
from ._records import STRATEGY_NAMES, Schema, simulate
from ._tasks import Estimates, simulate_task
from ._train import Model, train

# Shown as harmony_ldp.HarmonyError in tracebacks (the class lives in harmony_ldp._errors, where
# the native module imports it from).
HarmonyError.__module__ = "harmony_ldp"

__all__ = [
    "Aggregator",
    "Analyst",
    "Device",
    "device_reports",
    "FREQUENCY_NAMES",
    "NUMERIC_NAMES",
    "STRATEGY_NAMES",
    "Estimates",
    "FrequencyOracle",
    "HarmonyError",
    "Model",
    "NumericMechanism",
    "Schema",
    "plan",
    "read_spec",
    "resolve_config",
    "simulate",
    "simulate_task",
    "train",
    "unpack_bits",
]

try:
    from importlib.metadata import version as _version

    __version__ = _version("harmony-ldp")
except Exception:  # not installed as a distribution (a source checkout on sys.path)
    __version__ = "0+unknown"
