"""Plan -> a live local server: start, health, stop the tree; its log parsed. Imports: config, console, plan."""
