"""The Wyoming door (`mcp-media wyoming`): Home Assistant's voice pipeline speaks the Wyoming
protocol; this door answers `describe` from what the workers announce, and runs every
transcription and synthesis it is asked for as a job through the job gateway."""
