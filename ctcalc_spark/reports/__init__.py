"""Self-contained HTML reports (plots embedded) with CSV/JSON twins: drift over windows, pipeline comparison."""
