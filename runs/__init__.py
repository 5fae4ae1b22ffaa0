"""A run's output folder: its layout, its manifest (read and checked once), the staging swap that
replaces it, the lock that keeps a second run out, and the inventory of its files.
`runs.run_folder.RunFolder` is the one way in; the other modules are its parts."""
