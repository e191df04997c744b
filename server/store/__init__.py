"""The run store: the database, its tables, runs' statuses, metric queries and run files."""
