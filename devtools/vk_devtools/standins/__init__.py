"""Stand-ins for external services, for test suites and development clusters; never used in production."""
