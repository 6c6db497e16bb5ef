"""`invoke verify`: a rebuild from nothing compared bit for bit. Imports the core and the subjects below it."""
