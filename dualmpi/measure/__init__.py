"""Measurement: OSU-style timing of ping-pong chains and collectives under MPI."""

__all__ = []
