"""Units of time, in seconds, defined once for the whole package.

The package works in SI units; charts, widgets and data rows that speak in
minutes, hours or days convert with these names instead of typing 3600 again.
"""

MINUTE_S = 60.0


HOUR_S = 60.0 * MINUTE_S


DAY_S = 24.0 * HOUR_S


#: A gigabyte, in bytes (decimal, as GPU memory and link rates are quoted).
GB = 1e9

__all__ = ["DAY_S", "GB", "HOUR_S", "MINUTE_S"]
