"""Learning curves over the stored records: the figures (stats), how they are shown (report), the
facts cache (cache).
"""
