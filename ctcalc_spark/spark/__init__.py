"""Spark layer: sessions, the one-scan summary aggregation, atomic partition writes."""
