// Placeholder so the target builds before its first real test lands; delete it then.
