"""Projections: plain functions of (row state, event) that materialise read models."""
