"""The embedded actor runtime: a lease-holding scheduler and sharded schedule actors."""
