"""Telling others what a host did: observers of every fire (`observers`), the fire log,
OpenTelemetry, the passed-over report, the backend watch and the health endpoints."""
