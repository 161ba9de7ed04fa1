"""Self-Reflection: the reflector (an LLM, one repair) and what it reads (context), parsing its
answer, the heuristic fallback, quality flags.
"""
