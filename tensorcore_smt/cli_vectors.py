"""`tcsmt vectors ...` and `tcsmt probe ...` commands (test vectors and GPU probe programs)."""
