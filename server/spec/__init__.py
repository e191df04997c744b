"""Judging run specs with the library, in a child process of the API."""
