"""Signals of the capture path, for features above it (the regression watches), so
the worker modules send without importing them."""

from django.dispatch import Signal

# Sent (robustly) when a capture's analysis ended; kwargs: capture_id, status.
capture_analysed = Signal()

# Sent (robustly) by the state machine when a capture reached done, failed or
# cancelled; kwargs: capture_id, status. The whole-job report listens (group_report).
capture_ended = Signal()
