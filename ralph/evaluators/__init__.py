"""Checks that judge the working tree, and the suite that combines them into one evaluation."""
