// Replaced by the driver end-to-end tests.
