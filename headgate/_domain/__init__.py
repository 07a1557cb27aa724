"""Pure domain: schedule specs, events and decisions. No I/O lives here."""
