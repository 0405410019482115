"""`simrun calibrate`: judges run on human-labelled examples, their agreement, and the calibration report."""
