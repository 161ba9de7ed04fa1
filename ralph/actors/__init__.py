"""Actors: whatever changes the working tree in an iteration."""
