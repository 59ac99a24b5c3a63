"""Deterministic simulation of a VR cluster (see ``simulator``); run with ``python -m``."""

from lurcher.core.replication.sim.simulator import Outcome, Simulation, run_seed

__all__ = ["Outcome", "Simulation", "run_seed"]
