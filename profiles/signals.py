"""Signals of the capture path, for features above it (the regression watches), so
the worker modules send without importing them."""

from django.dispatch import Signal

# Sent (robustly) when a capture's analysis ended; kwargs: capture_id, status.
capture_analysed = Signal()
