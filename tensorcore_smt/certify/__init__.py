"""Certificates: proved intervals on a unit's worst error, divergence and exactness."""
