"""spec.failover: instances with their own storage, and a replica promoted when the primary is
lost. `probe` asks an engine what it is, `decide` says what to do (pure), `tend` does it."""
