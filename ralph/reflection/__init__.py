"""Self-Reflection: the seam (base: `Reflector`), the model's reflector (one repair) and what it
reads (context), parsing its answer, the heuristic fallback, quality flags.
"""
