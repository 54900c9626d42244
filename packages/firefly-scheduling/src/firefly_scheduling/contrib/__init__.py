"""Integrations with application frameworks, each behind its own optional extra."""
