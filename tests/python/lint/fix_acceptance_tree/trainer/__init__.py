"""A data-parallel trainer."""
