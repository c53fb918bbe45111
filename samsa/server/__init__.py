"""The broker process: asyncio listener, connections, dispatch."""
