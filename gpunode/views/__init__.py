"""Views read events and results; they never do work."""
