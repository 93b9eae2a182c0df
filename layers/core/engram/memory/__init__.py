"""Memory: what a session carries between turns, and how it is kept within bounds."""
