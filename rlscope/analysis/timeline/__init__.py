"""Timeline exports, as data: which processes, tracks and window (``select``), the slices
of each track (``slices``) and its counter tracks (``counters``). Writers: reporters."""
