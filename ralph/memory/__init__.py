"""Episodic memory on disk: the store (records, state, layout), the loop lock, search, lessons and
their retrieval, feedback, import/export and provenance.
"""
