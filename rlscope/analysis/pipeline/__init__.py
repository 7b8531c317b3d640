"""Opening a run: read each trace file once, correct, infer, analyse (serially, streamed,
or one task per process) into what every reporter needs."""
