"""Integrations with host frameworks, each importing its framework only when used."""
