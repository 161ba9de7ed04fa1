"""`ralph bench`: does the memory help? The ablation runner and its table."""
