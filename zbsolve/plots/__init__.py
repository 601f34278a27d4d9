"""Pictures of schedules: a Gantt chart per device and memory over time."""
